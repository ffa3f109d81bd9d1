// Losses are never hidden and a recorder never stalls its target: with slot reuse, thread
// churn under `record`, a recorder that attaches late, or one killed and left a zombie,
// records attempted = records read + every loss the tools report (`stats` of a trace of
// several processes counting each one's), and within one thread's stream no record is missing
// that its slot did not count as dropped.
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "nanotrace/analysis.hpp"
#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;
using testing::kCli;
using testing::kProducer;

uint64_t total_lost(const Trace& trace, const std::vector<ThreadStats>& threads) {
  uint64_t lost = 0;
  for (const ProcessInfo& p : trace.processes()) lost += p.lost_no_slot + p.lost_reclaimed;
  for (const ThreadStats& s : threads) lost += s.lost();
  return lost;
}

// Records out of sequence in their stream (one thread's ring), or missing from it uncounted.
// The reader numbers the published records (docs/format.md: a gap in its numbers is records
// overwritten, none in discard mode), and a drop is counted where it happens, not numbered:
// the slot's `dropped`, or the process's no-slot and reclaimed counts for records a thread
// wrote before it had a slot. So within a stream the producer's numbers increase, the
// reader's follow one another, and the producer numbers missing between its first and last
// record read are at most what the slot counted as dropped.
uint64_t hidden_losses(const testing::ReadResult& r) {
  struct Stream {
    const testing::TestRecord* first = nullptr;
    const testing::TestRecord* last = nullptr;
    uint64_t records = 0;
  };
  std::map<uint32_t, Stream> streams;
  uint64_t n = 0;
  for (const testing::TestRecord& t : r.records) {
    Stream& s = streams[t.stream];
    if (s.last != nullptr) {
      n += t.thread != s.last->thread || t.seq <= s.last->seq ||
           t.record_seq != s.last->record_seq + 1;
    } else {
      s.first = &t;
    }
    s.last = &t;
    ++s.records;
  }
  for (const auto& [index, s] : streams) {
    const uint64_t missing = s.last->seq - s.first->seq + 1 - s.records;
    const ThreadStats& counted = r.threads.at(index);
    if (missing > counted.dropped + counted.overwritten) n += missing;
  }
  return n;
}

TEST(LossAccountingTest, SlotReuseInDiscardModeCountsEveryLoss) {
  const uint64_t kThreads = 300, kEvents = 20000;
  ChildProcess producer({kProducer, "--threads", std::to_string(kThreads), "--events",
                         std::to_string(kEvents), "--hold"},
                        {"NANOTRACE_MODE=discard", "NANOTRACE_THREADS=64", "NANOTRACE_BUFFER=64K"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(producer.read_line(), "ready");
  auto trace = testing::open_ok(std::to_string(pid));
  ASSERT_TRUE(trace);
  testing::ReadResult r = testing::read_test_records(*trace);
  EXPECT_EQ(r.bad_checksums, 0u);
  EXPECT_EQ(hidden_losses(r), 0u);
  uint64_t lost = total_lost(*trace, r.threads);
  EXPECT_EQ(r.records.size() + lost, kThreads * kEvents)
      << "read " << r.records.size() << ", lost_no_slot " << trace->process().lost_no_slot
      << ", lost_reclaimed " << trace->process().lost_reclaimed;
  // The same totals from `nanotrace stats --json`.
  int code = 0;
  std::string out = testing::run_command(kCli + " stats " + std::to_string(pid) + " --json", &code);
  ASSERT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out.substr(0, 200);
  EXPECT_EQ(j.value("records", uint64_t{0}) + j.value("lost", uint64_t{0}), kThreads * kEvents)
      << "stats: records " << j.value("records", uint64_t{0}) << " lost "
      << j.value("lost", uint64_t{0});
  producer.close_stdin();
  EXPECT_EQ(WEXITSTATUS(producer.wait()), 0);
}

// Two processes that each lose records for want of a thread slot, recorded into one file:
// analyze_stats and `nanotrace stats` count the no-slot and reclaimed losses of both, so
// records read + lost = records attempted, for each process and in total.
TEST(LossAccountingTest, StatsOfSeveralProcessesCountEveryProcesssLosses) {
  const uint64_t kThreads = testing::kLossyThreads, kEvents = testing::kLossyEvents;
  const std::string file = testing::temp_path("two-lossy.ntr");
  ASSERT_EQ(testing::record_two_lossy_processes(file), "");
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  ASSERT_EQ(trace->processes().size(), 2u);
  uint64_t no_slot = 0, reclaimed = 0;
  for (const ProcessInfo& p : trace->processes()) {
    // The case this test is about: each process lost records outside its threads' rings.
    ASSERT_GT(p.lost_no_slot + p.lost_reclaimed, 0u) << "pid " << p.pid;
    no_slot += p.lost_no_slot;
    reclaimed += p.lost_reclaimed;
  }
  testing::ReadResult r = testing::read_test_records(*trace);
  EXPECT_EQ(r.bad_checksums, 0u);
  EXPECT_EQ(hidden_losses(r), 0u);
  // Per process: what it attempted is what was read plus what it lost.
  std::map<uint32_t, uint64_t> read, lost;
  for (const ThreadStats& t : r.threads) {
    read[t.info.pid] += t.records;
    lost[t.info.pid] += t.lost();
  }
  for (const ProcessInfo& p : trace->processes()) {
    EXPECT_EQ(read[p.pid] + lost[p.pid] + p.lost_no_slot + p.lost_reclaimed, kThreads * kEvents)
        << "pid " << p.pid;
  }
  const TraceStats st = analyze_stats(*trace);
  EXPECT_EQ(st.lost_no_slot, no_slot);
  EXPECT_EQ(st.lost_reclaimed, reclaimed);
  EXPECT_EQ(st.lost, total_lost(*trace, r.threads));
  EXPECT_EQ(st.total.count + st.lost, 2 * kThreads * kEvents);
  int code = 0;
  auto j = nlohmann::json::parse(testing::run_command(kCli + " stats " + file + " --json", &code),
                                 nullptr, false);
  ASSERT_EQ(code, 0);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["lost"].get<uint64_t>(), st.lost);
  EXPECT_EQ(j["lost_no_slot"].get<uint64_t>(), no_slot);
  EXPECT_EQ(j["lost_reclaimed"].get<uint64_t>(), reclaimed);
  EXPECT_EQ(j["records"].get<uint64_t>() + j["lost"].get<uint64_t>(), 2 * kThreads * kEvents);
  unlink(file.c_str());
}

// Every (producer thread, seq) of `threads` x `per` exactly once.
void expect_every_id(const testing::ReadResult& r, uint64_t threads, uint64_t per) {
  std::vector<uint8_t> seen(threads * per, 0);
  uint64_t duplicates = 0, foreign = 0;
  for (const testing::TestRecord& t : r.records) {
    if (t.thread >= threads || t.seq >= per) {
      ++foreign;
      continue;
    }
    duplicates += seen[t.thread * per + t.seq]++ != 0;
  }
  uint64_t missing = 0, first_missing = ~uint64_t{0};
  for (uint64_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      if (!missing) first_missing = i;
      ++missing;
    }
  }
  EXPECT_EQ(missing, 0u) << "first missing: thread " << first_missing / per << " seq "
                         << first_missing % per;
  EXPECT_EQ(duplicates, 0u);
  EXPECT_EQ(foreign, 0u);
}

TEST(LossAccountingTest, ThreadChurnUnderRecordInBlockModeLosesNothing) {
  const uint64_t kThreads = 20000, kPer = 5;
  ChildProcess producer({kProducer, "--spawn", std::to_string(kThreads), "--alive", "2", "--events",
                         std::to_string(kPer), "--go"},
                        // A writer waits at most the block timeout for the recorder; under
                        // ASan on a loaded machine the default 100 ms is too short for it.
                        {"NANOTRACE_MODE=block", "NANOTRACE_THREADS=256", "NANOTRACE_BUFFER=64K",
                         "NANOTRACE_BLOCK_TIMEOUT=10s"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = testing::temp_path("churn.ntr");
  // Its report has a line per thread (20,000): keep it out of the test log.
  ChildProcess recorder(
      {"/bin/sh", "-c",
       "exec " + kCli + " record " + std::to_string(pid) + " -o " + file + " 2>/dev/null"},
      {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  producer.close_stdin();  // go
  int pstatus = producer.wait();
  EXPECT_TRUE(WIFEXITED(pstatus) && WEXITSTATUS(pstatus) == 0) << pstatus;
  std::string output, line;
  while (!(line = recorder.read_line()).empty()) output += line + "\n";
  int status = recorder.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  testing::ReadResult r = testing::read_test_records(*trace);
  EXPECT_EQ(r.bad_checksums, 0u);
  // Block mode with a recorder attached waits for a slot to be drained rather than drop.
  EXPECT_EQ(r.records.size(), kThreads * kPer)
      << "lost_no_slot " << trace->process().lost_no_slot << ", lost_reclaimed "
      << trace->process().lost_reclaimed;
  EXPECT_EQ(total_lost(*trace, r.threads), 0u);
  expect_every_id(r, kThreads, kPer);
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

// Per producer thread, the file's records and reported losses cover every record the thread
// attempted from the first one in the file on.
TEST(LossAccountingTest, LateRecorderReportsEveryMissingRecord) {
  ChildProcess producer({kProducer, "--threads", "2", "--forever"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=64K"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  // No consumer yet: the rings fill, and the writers drop (and count) what does not fit.
  bool dropped = false;
  for (int i = 0; i < 2000 && !dropped; ++i) {
    auto t = Trace::open_pid(pid);
    if (t.ok()) {
      uint64_t d = 0;
      for (const ThreadInfo& th : (*t)->threads()) d += th.dropped;
      dropped = d > 100000;
    }
    if (!dropped) usleep(5000);
  }
  ASSERT_TRUE(dropped) << "the writers never dropped without a consumer";
  std::string file = testing::temp_path("late.ntr");
  ChildProcess recorder({kCli, "record", std::to_string(pid), "-o", file}, {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  usleep(300000);
  producer.close_stdin();
  std::map<uint64_t, uint64_t> attempted;
  std::string line;
  while (!(line = producer.read_line()).empty()) {
    unsigned long long t = 0, n = 0;
    if (std::sscanf(line.c_str(), "attempted %llu %llu", &t, &n) == 2) attempted[t] = n;
  }
  producer.wait();
  std::string output;
  while (!(line = recorder.read_line()).empty()) output += line + "\n";
  int status = recorder.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  ASSERT_EQ(attempted.size(), 2u);
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  testing::ReadResult r = testing::read_test_records(*trace);
  EXPECT_EQ(r.bad_checksums, 0u);
  // Drops leave no gap in the record numbers (they are never published); they are counted,
  // and the count must cover exactly the ids that are missing.
  std::map<uint64_t, uint64_t> first, count;
  std::map<uint64_t, uint32_t> stream_of;
  for (const testing::TestRecord& t : r.records) {
    if (!count[t.thread]++) first[t.thread] = t.seq;
    stream_of[t.thread] = t.stream;
  }
  for (const auto& [thread, n] : attempted) {
    ASSERT_TRUE(count[thread] > 0) << "thread " << thread << " has no records in the file";
    const ThreadStats& s = r.threads.at(stream_of[thread]);
    uint64_t missing = n - first[thread] - count[thread];
    EXPECT_EQ(s.lost(), missing) << "thread " << thread << ": attempted " << n << ", first in file "
                                 << first[thread] << ", in file " << count[thread]
                                 << ", reported lost " << s.lost() << " (dropped " << s.dropped
                                 << ", overwritten " << s.overwritten << ")";
  }
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

uint64_t written_now(pid_t pid) {
  auto t = Trace::open_pid(pid);
  if (!t.ok()) return 0;
  uint64_t w = 0;
  for (const ThreadInfo& th : (*t)->threads()) w += th.written + th.dropped;
  return w;
}

TEST(LossAccountingTest, ZombieRecorderStallsNothing) {
  ChildProcess producer({kProducer, "--threads", "1", "--forever"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=64K"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = testing::temp_path("zombie.ntr");
  {
    ChildProcess recorder({kCli, "record", std::to_string(pid), "-o", file}, {});
    ASSERT_TRUE(testing::wait_consumer(pid));
    usleep(100000);
    // Killed and not reaped: a zombie with the consumer's pid.
    kill(recorder.pid(), SIGKILL);
    usleep(100000);
    uint64_t before = written_now(pid);
    // A writer may wait for the consumer for a bounded time only; a dead one must not hold it.
    bool progressed = false;
    for (int i = 0; i < 100 && !progressed; ++i) {
      usleep(100000);
      progressed = written_now(pid) > before + 100000;
    }
    EXPECT_TRUE(progressed) << "the writer made no progress in 10 s with a zombie recorder: "
                            << before << " -> " << written_now(pid);
    // A new recording is accepted while the zombie is still there; it takes the next 50000
    // records (a fixed amount, whatever the machine's speed).
    std::string file2 = testing::temp_path("zombie2.ntr");
    const std::string stop_on = "test:rec seq>=" + std::to_string(written_now(pid) + 50000);
    int code = 0;
    std::string out = testing::run_command(kCli + " record " + std::to_string(pid) + " -o " +
                                               file2 + " --stop-on '" + stop_on + "' 2>&1",
                                           &code);
    EXPECT_EQ(code, 0) << out;
    auto trace = Trace::open(file2);
    EXPECT_TRUE(trace.ok()) << trace.status().message();
    if (trace.ok()) {
      testing::ReadResult r = testing::read_test_records(**trace);
      EXPECT_GT(r.records.size(), 0u);
      EXPECT_EQ(r.bad_checksums, 0u);
    }
    unlink(file2.c_str());
  }  // the recorder is reaped here
  producer.close_stdin();
  producer.wait();
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

}  // namespace
}  // namespace nanotrace
