// `nanotrace record`, `snapshot`, `recover` and `clean` through the real CLI on real traced
// processes: block mode loses nothing, a killed target's records are recovered whole, a
// killed recorder or a full disk leave a readable prefix, --stop-on ends at the match,
// clean removes only segments of processes that are gone. The recorder counts records from
// block headers rather than walking them: its counts and the consumer position it leaves
// must still be exact in every mode, and a second recording must start where the first
// ended. Also: the checksum's fast path is still CRC-32C.
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/file_format.hpp"
#include "common/prerequisite.hpp"
#include "reader/trace_internals.hpp"
#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;
using testing::kCli;
using testing::kPacedProducer;
using testing::kProducer;

// Block mode in the tests that assert nothing is lost: a writer waits for the recorder as
// long as the recorder lives. The default bound (100 ms, then drops, counted) is reached by a
// recorder descheduled that long on a loaded machine, which is not what these tests are about.
const char* const kWaitForTheRecorder = "NANOTRACE_BLOCK_TIMEOUT=inf";

// The records of the paced producer's 2-field event (test:rec2, see paced_producer.cc), each
// checksum verified; per producer thread, the first and last payload and record numbers.
struct Rec2Read {
  uint64_t records = 0, bad = 0, other = 0;
  uint64_t payload_gaps = 0;  // a payload seq that is not the previous one + 1
  uint64_t record_gaps = 0;   // a reader record seq that is not the previous one + 1
  std::map<uint64_t, uint64_t> first, last, first_rseq, last_rseq;
  std::vector<ThreadStats> threads;
};

Rec2Read read_rec2(Trace& trace) {
  Rec2Read out;
  auto source = trace.read_all();
  Record r;
  while (source->next(&r)) {
    if (r.event->full_name() != "test:rec2" || r.field_count != 2) {
      ++out.other;
      continue;
    }
    uint64_t thread = r.values[0].bits >> 48, seq = r.values[0].bits & ((uint64_t{1} << 48) - 1);
    if (r.values[1].bits != testing::producer_checksum(thread, seq, seq * 7 + thread)) ++out.bad;
    if (!out.first.count(thread)) {
      out.first[thread] = seq;
      out.first_rseq[thread] = r.seq;
    } else {
      out.payload_gaps += seq != out.last[thread] + 1;
      out.record_gaps += r.seq != out.last_rseq[thread] + 1;
    }
    out.last[thread] = seq;
    out.last_rseq[thread] = r.seq;
    ++out.records;
  }
  out.threads = source->threads();
  return out;
}

uint64_t recorded_count(const std::string& output) {
  size_t at = output.find("recorded ");
  return at == std::string::npos ? ~uint64_t{0} : std::stoull(output.substr(at + 9));
}

// Records a paced producer (two threads of 2-field events at full speed, a 64 KiB ring of
// 4 KiB blocks, `mode`) until it exits. Its segment is kept for the caller to inspect.
struct PacedRecording {
  pid_t pid = -1;
  std::string file, output;
  uint64_t produced = 0;
  bool ok = false;
};

PacedRecording record_paced(const std::string& mode, const std::string& name,
                            const std::string& copy = "") {
  PacedRecording run;
  ChildProcess producer(
      {kPacedProducer, "--threads", "2", "--rate", "0", "--events", "300000", "--fields", "2",
       "--go"},
      {"NANOTRACE_MODE=" + mode, "NANOTRACE_BUFFER=64K", "NANOTRACE_KEEP=1", kWaitForTheRecorder});
  run.pid = testing::read_pid(producer);
  if (run.pid <= 0) return run;
  run.file = name.find('/') == std::string::npos ? testing::temp_path(name) : name;
  ChildProcess recorder(
      {"/bin/sh", "-c",
       "exec " + kCli + " record " + std::to_string(run.pid) + " -o " + run.file + " 2>&1"},
      {"NANOTRACE_RECORD_COPY=" + copy});
  if (!testing::wait_consumer(run.pid)) return run;
  producer.close_stdin();
  std::string done = producer.read_line();  // "done <records> <seconds>"
  producer.wait();
  std::string line;
  while (!(line = recorder.read_line()).empty()) run.output += line + "\n";
  int status = recorder.wait();
  run.produced = done.size() > 5 ? std::stoull(done.substr(5)) : 0;
  run.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && run.produced > 0;
  return run;
}

// The consumer position the recorder left in every slot of the kept segment: exactly at the
// writer's head, and at the writer's record count.
void expect_fully_consumed(pid_t pid) {
  auto segment = testing::open_ok(testing::segment_of(pid));
  ASSERT_TRUE(segment);
  const uint8_t* base = reader::TraceInternals::base(*segment);
  auto* h = reinterpret_cast<const abi::SegmentHeader*>(base);
  auto* slots = reinterpret_cast<const abi::ThreadSlot*>(base + h->threads_offset);
  ASSERT_FALSE(segment->threads().empty());
  for (const ThreadInfo& t : segment->threads()) {
    EXPECT_EQ(t.consumed_records, t.written) << "slot " << t.slot;
    EXPECT_EQ(slots[t.slot].consumed, t.head) << "slot " << t.slot;
  }
}

TEST(RecordTest, BlockModeRecordingLosesNothing) {
  const uint64_t n = 3000000, threads = 2;
  ChildProcess producer(
      {kProducer, "--threads", std::to_string(threads), "--events", std::to_string(n), "--go"},
      {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=256K", kWaitForTheRecorder});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = testing::temp_path("block.ntr");
  ChildProcess recorder({kCli, "record", std::to_string(pid), "-o", file}, {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  producer.close_stdin();  // go
  producer.wait();
  int status = recorder.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->warning(), "");
  auto result = testing::read_test_records(*trace);
  EXPECT_EQ(result.bad_checksums, 0u);
  EXPECT_EQ(result.records.size(), n * threads);
  auto c = testing::check_continuity(result);
  EXPECT_EQ(c.gaps, 0u);
  for (uint64_t t = 0; t < threads; ++t) {
    EXPECT_EQ(c.first[t], 0u);
    EXPECT_EQ(c.next[t], n);
  }
  for (const ThreadStats& s : result.threads) {
    EXPECT_EQ(s.lost(), 0u);
    EXPECT_EQ(s.corrupt_blocks, 0u);
  }
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

TEST(RecordTest, KilledTargetIsRecoveredWhole) {
  ChildProcess producer({kProducer, "--threads", "3", "--forever"},
                        {"NANOTRACE_MODE=overwrite", "NANOTRACE_BUFFER=1M"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  usleep(300000);
  kill(pid, SIGKILL);
  producer.wait();
  // What the reader takes out of the dead segment directly...
  auto segment = testing::open_ok(testing::segment_of(pid));
  ASSERT_TRUE(segment);
  ASSERT_FALSE(segment->process().alive);
  auto direct = testing::read_test_records(*segment);
  // ...and what recover writes to a file.
  std::string file = testing::temp_path("recovered.ntr");
  int code = 0;
  testing::run_command(kCli + " recover " + std::to_string(pid) + " -o " + file + " 2>&1", &code);
  ASSERT_EQ(code, 0);
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  auto result = testing::read_test_records(*trace);
  EXPECT_EQ(result.bad_checksums, 0u);
  ASSERT_GT(result.records.size(), 1000u);
  auto c = testing::check_continuity(result);
  EXPECT_EQ(c.gaps, 0u);
  // Every record each thread published is there: up to the slot's written count, or one
  // more (a writer publishes its record, then counts it: the kill may fall in between).
  std::map<uint32_t, uint64_t> written;
  for (const ThreadInfo& t : segment->threads()) written[t.tid] = t.written;
  for (const ThreadStats& s : result.threads) {
    uint64_t last = s.records + s.overwritten;  // seq after the last record
    EXPECT_GE(last + 1, written[s.info.tid]) << "thread " << s.info.tid;
    EXPECT_LE(last, written[s.info.tid] + 1) << "thread " << s.info.tid;
  }
  ASSERT_EQ(direct.records.size(), result.records.size());
  for (size_t i = 0; i < result.records.size(); ++i) {
    ASSERT_EQ(direct.records[i].thread, result.records[i].thread);
    ASSERT_EQ(direct.records[i].seq, result.records[i].seq);
  }
  // A running process is not "recovered".
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

TEST(RecordTest, KilledRecorderLeavesReadablePrefix) {
  ChildProcess producer({kProducer, "--threads", "2", "--forever"},
                        {"NANOTRACE_MODE=overwrite", "NANOTRACE_BUFFER=256K"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = testing::temp_path("killed.ntr");
  ChildProcess recorder({kCli, "record", std::to_string(pid), "-o", file}, {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  usleep(700000);
  kill(recorder.pid(), SIGKILL);
  recorder.wait();
  producer.close_stdin();
  producer.wait();
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  EXPECT_NE(trace->warning(), "");  // no END chunk
  auto result = testing::read_test_records(*trace);
  EXPECT_EQ(result.bad_checksums, 0u);
  EXPECT_GT(result.records.size(), 0u);
  int code = 0;
  std::string out = testing::run_command(kCli + " dump " + file + " -n 5 2>/dev/null", &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("test:rec"), std::string::npos);
  // Cut inside the last chunk: still the same prefix minus that chunk.
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  ASSERT_EQ(truncate(file.c_str(), st.st_size - 7), 0);
  auto cut = testing::open_ok(file);
  ASSERT_TRUE(cut);
  auto cut_result = testing::read_test_records(*cut);
  EXPECT_EQ(cut_result.bad_checksums, 0u);
  EXPECT_LE(cut_result.records.size(), result.records.size());
  unlink(file.c_str());
}

TEST(RecordTest, DiskFullGivesClearErrorAndReadablePrefix) {
  std::string dir = testing::temp_path("tmpfs");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  if (mount("none", dir.c_str(), "tmpfs", 0, "size=1M") != 0) {
    const int error = errno;
    rmdir(dir.c_str());
    NANOTRACE_REQUIRE(false, "cannot mount a tmpfs (" << std::strerror(error) << ")");
  }
  // Unmounted however the test ends (a failed ASSERT returns early).
  struct Unmount {
    std::string dir;
    ~Unmount() {
      umount2(dir.c_str(), MNT_DETACH);
      rmdir(dir.c_str());
    }
  } unmount{dir};
  ChildProcess producer({kProducer, "--threads", "1", "--events", "2000000", "--go"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=256K", kWaitForTheRecorder});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = dir + "/full.ntr";
  ChildProcess recorder(
      {"/bin/sh", "-c",
       "exec " + kCli + " record " + std::to_string(pid) + " -o " + file + " 2>&1"},
      {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  producer.close_stdin();
  std::string output, line;
  while (!(line = recorder.read_line()).empty()) output += line + "\n";
  int status = recorder.wait();
  producer.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << output;
  EXPECT_NE(output.find("no space left on device"), std::string::npos) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  auto result = testing::read_test_records(*trace);
  EXPECT_EQ(result.bad_checksums, 0u);
  EXPECT_GT(result.records.size(), 1000u);
  auto c = testing::check_continuity(result);
  EXPECT_EQ(c.gaps, 0u);
  EXPECT_EQ(c.first[0], 0u);
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

TEST(RecordTest, SnapshotOfLiveOverwriteProcess) {
  // A writer at full speed (~3 GB/s) laps a ring as fast as a copy can take it out; at a
  // sustained 2 M records/s the snapshot keeps nearly the whole ring.
  ChildProcess producer({testing::kPacedProducer, "--threads", "1", "--rate", "2000000"},
                        {"NANOTRACE_MODE=overwrite", "NANOTRACE_BUFFER=1M"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  usleep(300000);
  std::string file = testing::temp_path("snap.ntr");
  int code = 0;
  std::string out = testing::run_command(
      kCli + " snapshot " + std::to_string(pid) + " -o " + file + " 2>&1", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(kill(pid, 0), 0);  // still running
  producer.close_stdin();
  producer.wait();
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->warning(), "");
  auto result = testing::read_test_records(*trace);
  EXPECT_EQ(result.bad_checksums, 0u);
  ASSERT_GT(result.records.size(), 1000u);
  auto c = testing::check_continuity(result);
  EXPECT_EQ(c.gaps, 0u);
  ASSERT_EQ(result.threads.size(), 1u);
  // The ring wrapped: the records before the oldest intact block are counted, not returned.
  EXPECT_GT(result.threads[0].overwritten, 0u);
  EXPECT_EQ(result.threads[0].overwritten, result.records[0].seq);
  EXPECT_EQ(result.records[0].record_seq, result.records[0].seq);
  unlink(file.c_str());
}

// Records a test producer (2 threads of `events` records, block mode) to a file with the
// recorder's extra arguments; the recorder's output is kept.
struct TriggeredRecording {
  pid_t pid = 0;
  std::string file;
  std::string output;
  bool ok = false;
};

TriggeredRecording record_with(uint64_t events, const std::string& name, const std::string& extra) {
  TriggeredRecording run;
  ChildProcess producer({kProducer, "--threads", "2", "--events", std::to_string(events), "--go"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=256K", kWaitForTheRecorder});
  run.pid = testing::read_pid(producer);
  if (run.pid <= 0) return run;
  run.file = testing::temp_path(name);
  ChildProcess recorder({"/bin/sh", "-c",
                         "exec " + kCli + " record " + std::to_string(run.pid) + " -o " + run.file +
                             " " + extra + " 2>&1"},
                        {});
  if (!testing::wait_consumer(run.pid)) return run;
  producer.close_stdin();
  std::string line;
  while (!(line = recorder.read_line()).empty()) run.output += line + "\n";
  int status = recorder.wait();
  producer.wait();
  run.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return run;
}

TEST(RecordTest, StopOnEndsRightAfterTheMatchingRecord) {
  TriggeredRecording run =
      record_with(200000, "stop.ntr", "--stop-on 'test:rec thread==1 && seq==5000'");
  ASSERT_TRUE(run.ok) << run.output;
  EXPECT_NE(run.output.find("stopped on record 5000 (test:rec"), std::string::npos) << run.output;
  auto trace = testing::open_ok(run.file);
  ASSERT_TRUE(trace);
  auto result = testing::read_test_records(*trace);
  auto c = testing::check_continuity(result);
  EXPECT_EQ(c.gaps, 0u);
  EXPECT_EQ(c.next[1], 5001u);  // thread 1 ends with the match
  EXPECT_EQ(recorded_count(run.output), result.records.size()) << run.output;
  unlink(run.file.c_str());
  unlink(testing::segment_of(run.pid).c_str());
}

TEST(RecordTest, SnapshotOnWritesTheRingsWhenARecordMatches) {
  TriggeredRecording run =
      record_with(100000, "snapon.ntr", "--snapshot-on 'test:rec thread==0 && seq==50000'");
  ASSERT_TRUE(run.ok) << run.output;
  const std::string& file = run.file;
  EXPECT_NE(run.output.find("snapshot written: " + file + ".snap1"), std::string::npos)
      << run.output;
  // The recording itself is complete; the snapshot holds intact records, none lost.
  auto whole = testing::open_ok(file);
  ASSERT_TRUE(whole);
  EXPECT_EQ(testing::read_test_records(*whole).records.size(), 200000u);
  auto snap = testing::open_ok(file + ".snap1");
  ASSERT_TRUE(snap);
  auto result = testing::read_test_records(*snap);
  EXPECT_EQ(result.bad_checksums, 0u);
  EXPECT_EQ(testing::check_continuity(result).gaps, 0u);
  for (const ThreadStats& s : result.threads) EXPECT_EQ(s.lost(), 0u);
  unlink(file.c_str());
  unlink((file + ".snap1").c_str());
  unlink(testing::segment_of(run.pid).c_str());
}

TEST(RecordTest, FollowsReusedSlotsAndAccountsForEveryRecord) {
  const uint64_t churn = 300;  // short-lived threads, 3 records each, through 4 slots
  ChildProcess producer({kProducer, "--churn", std::to_string(churn), "--go"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_THREADS=4", "NANOTRACE_BUFFER=64K"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = testing::temp_path("churn.ntr");
  ChildProcess recorder({kCli, "record", std::to_string(pid), "-o", file}, {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  producer.close_stdin();
  producer.wait();
  int status = recorder.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  auto source = trace->read_all();
  Record r;
  uint64_t records = 0;
  std::map<uint64_t, uint64_t> next_seq;  // churn thread -> lowest seq still possible
  while (source->next(&r)) {
    ASSERT_EQ(r.event->full_name(), "test:churn");
    // In order; a record may be missing (dropped for want of a free slot, and counted).
    EXPECT_GE(r.values[1].bits, next_seq[r.values[0].bits]);
    EXPECT_LT(r.values[1].bits, 3u);
    next_seq[r.values[0].bits] = r.values[1].bits + 1;
    ++records;
  }
  uint64_t lost = trace->process().lost_no_slot + trace->process().lost_reclaimed;
  for (const ThreadStats& s : source->threads()) lost += s.lost();
  EXPECT_EQ(records + lost, churn * 3);
  EXPECT_GT(source->threads().size(), 4u);  // slots were reused: one stream per generation
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

TEST(RecordTest, BlockModeCountsFromBlockHeadersAreExact) {
  PacedRecording run = record_paced("block", "count-block.ntr");
  ASSERT_TRUE(run.ok) << run.output;
  auto trace = testing::open_ok(run.file);
  ASSERT_TRUE(trace);
  Rec2Read r = read_rec2(*trace);
  EXPECT_EQ(r.bad, 0u);
  EXPECT_EQ(r.records, run.produced);
  EXPECT_EQ(recorded_count(run.output), run.produced) << run.output;
  EXPECT_EQ(r.payload_gaps, 0u);
  EXPECT_EQ(r.record_gaps, 0u);
  ASSERT_EQ(r.first.size(), 2u);
  for (auto [thread, first] : r.first) EXPECT_EQ(first, 0u) << "thread " << thread;
  for (const ThreadStats& s : r.threads) EXPECT_EQ(s.lost(), 0u);
  expect_fully_consumed(run.pid);
  unlink(run.file.c_str());
  unlink(testing::segment_of(run.pid).c_str());
}

TEST(RecordTest, EveryCopyPathWritesEveryRecord) {
  // NANOTRACE_RECORD_COPY: each way of moving ring bytes to the file, to tmpfs (where the
  // kernel can copy from the segment) and, for copy_file_range, to /tmp (another file system
  // here, where it falls back to writing from the mapping).
  const std::string shm = "/dev/shm/nanotrace-test-" + std::to_string(getpid()) + "-copy.ntr";
  std::vector<std::pair<std::string, std::string>> cases = {
      {"writev", shm},
      {"buffered", shm},
      {"copy_file_range", shm},
      {"splice", shm},
      {"copy_file_range", "copy-other-fs.ntr"}};
  for (const auto& [copy, file] : cases) {
    SCOPED_TRACE(copy + " to " + file);
    PacedRecording run = record_paced("block", file, copy);
    ASSERT_TRUE(run.ok) << run.output;
    EXPECT_EQ(run.output.find("unavailable"), std::string::npos) << run.output;
    auto trace = testing::open_ok(run.file);
    ASSERT_TRUE(trace);
    EXPECT_EQ(trace->warning(), "");
    Rec2Read r = read_rec2(*trace);
    EXPECT_EQ(r.bad, 0u);
    EXPECT_EQ(r.records, run.produced);
    EXPECT_EQ(r.payload_gaps, 0u);
    expect_fully_consumed(run.pid);
    unlink(run.file.c_str());
    unlink(testing::segment_of(run.pid).c_str());
  }
}

TEST(RecordTest, DiscardModeCountsFromBlockHeadersAreExact) {
  PacedRecording run = record_paced("discard", "count-discard.ntr");
  ASSERT_TRUE(run.ok) << run.output;
  auto trace = testing::open_ok(run.file);
  ASSERT_TRUE(trace);
  Rec2Read r = read_rec2(*trace);
  EXPECT_EQ(r.bad, 0u);
  EXPECT_EQ(recorded_count(run.output), r.records) << run.output;
  // Dropped records have no record number: the payload may skip, the record numbers not.
  EXPECT_EQ(r.record_gaps, 0u);
  uint64_t dropped = 0;
  for (const ThreadStats& s : r.threads) {
    EXPECT_EQ(s.overwritten, 0u);
    dropped += s.dropped;
  }
  EXPECT_EQ(r.records + dropped, run.produced);
  expect_fully_consumed(run.pid);
  unlink(run.file.c_str());
  unlink(testing::segment_of(run.pid).c_str());
}

TEST(RecordTest, OverwriteModeCountsFromBlockHeadersAreExact) {
  PacedRecording run = record_paced("overwrite", "count-overwrite.ntr");
  ASSERT_TRUE(run.ok) << run.output;
  auto trace = testing::open_ok(run.file);
  ASSERT_TRUE(trace);
  Rec2Read r = read_rec2(*trace);
  EXPECT_EQ(r.bad, 0u);
  EXPECT_EQ(recorded_count(run.output), r.records) << run.output;
  // What the writer overwrote before it was copied is counted, the rest is in the file.
  uint64_t overwritten = 0;
  for (const ThreadStats& s : r.threads) {
    EXPECT_EQ(s.dropped, 0u);
    overwritten += s.overwritten;
  }
  EXPECT_EQ(r.records + overwritten, run.produced);
  for (auto [thread, last] : r.last) {
    EXPECT_EQ(r.last_rseq[thread], last) << "thread " << thread;  // nothing before was left out
  }
  expect_fully_consumed(run.pid);
  unlink(run.file.c_str());
  unlink(testing::segment_of(run.pid).c_str());
}

TEST(RecordTest, SecondRecordingStartsWhereTheFirstEnded) {
  // Each recording ends mid-block; the next one must take the following record, not the
  // block's first one again, and must not count the records before it as lost.
  ChildProcess producer({kPacedProducer, "--threads", "2", "--rate", "300000", "--fields", "2"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=64K"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::vector<std::string> files;
  for (int i = 0; i < 3; ++i) {
    files.push_back(testing::temp_path("twice" + std::to_string(i) + ".ntr"));
    int code = 0;
    std::string out = testing::run_command(
        kCli + " record " + std::to_string(pid) + " -o " + files.back() + " --duration 0.3 2>&1",
        &code);
    ASSERT_EQ(code, 0) << out;
  }
  producer.close_stdin();
  producer.wait();
  std::map<uint64_t, uint64_t> next_rseq;  // producer thread -> first record number expected
  for (const std::string& f : files) {
    auto trace = testing::open_ok(f);
    ASSERT_TRUE(trace);
    Rec2Read r = read_rec2(*trace);
    EXPECT_EQ(r.bad, 0u);
    EXPECT_EQ(r.record_gaps, 0u);
    ASSERT_EQ(r.first.size(), 2u) << f;
    for (auto [thread, first] : r.first_rseq) {
      if (next_rseq.count(thread)) {
        EXPECT_EQ(first, next_rseq[thread]) << f << " thread " << thread;
      }
      next_rseq[thread] = r.last_rseq[thread] + 1;
    }
    for (const ThreadStats& s : r.threads) EXPECT_EQ(s.overwritten, 0u) << f;
    unlink(f.c_str());
  }
  unlink(testing::segment_of(pid).c_str());
}

TEST(RecordTest, CleanRemovesOnlySegmentsOfProcessesThatAreGone) {
  ChildProcess dead({kProducer, "--events", "100", "--hold"}, {});
  pid_t dead_pid = testing::read_pid(dead);
  ASSERT_EQ(dead.read_line(), "ready");
  kill(dead_pid, SIGKILL);
  dead.wait();
  ChildProcess live({kProducer, "--events", "100", "--hold"}, {});
  pid_t live_pid = testing::read_pid(live);
  ASSERT_EQ(live.read_line(), "ready");
  struct stat st;
  ASSERT_EQ(stat(testing::segment_of(dead_pid).c_str(), &st), 0);
  int code = 0;
  std::string out = testing::run_command(kCli + " clean --dry-run", &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("would remove " + testing::segment_of(dead_pid)), std::string::npos) << out;
  EXPECT_EQ(out.find(testing::segment_of(live_pid)), std::string::npos) << out;
  EXPECT_EQ(stat(testing::segment_of(dead_pid).c_str(), &st), 0);
  out = testing::run_command(kCli + " clean", &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("removed " + testing::segment_of(dead_pid)), std::string::npos) << out;
  EXPECT_NE(stat(testing::segment_of(dead_pid).c_str(), &st), 0);
  EXPECT_EQ(stat(testing::segment_of(live_pid).c_str(), &st), 0);
  live.close_stdin();
  live.wait();
}

TEST(RecordTest, RecordRefusesASecondConsumer) {
  ChildProcess producer({kProducer, "--events", "1000", "--go"}, {"NANOTRACE_MODE=block"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = testing::temp_path("first.ntr");
  ChildProcess recorder({kCli, "record", std::to_string(pid), "-o", file}, {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  int code = 0;
  std::string out = testing::run_command(
      kCli + " record " + std::to_string(pid) + " -o " + file + ".2 2>&1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("already has a consumer"), std::string::npos) << out;
  producer.close_stdin();
  producer.wait();
  recorder.wait();
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

}  // namespace
}  // namespace nanotrace
