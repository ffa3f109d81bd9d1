// `nanotrace record`, `snapshot`, `recover` and `clean` through the real CLI on real traced
// processes: block mode loses nothing, a killed target's records are recovered whole, a
// killed recorder or a full disk leave a readable prefix, --stop-on ends at the match,
// clean removes only segments of processes that are gone.
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;
using testing::kCli;
using testing::kProducer;

TEST(RecordTest, BlockModeRecordingLosesNothing) {
  const uint64_t n = 3000000, threads = 2;
  ChildProcess producer(
      {kProducer, "--threads", std::to_string(threads), "--events", std::to_string(n), "--go"},
      {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=256K"});
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
  // Every record each thread completed is there: up to the slot's written count.
  std::map<uint32_t, uint64_t> written;
  for (const ThreadInfo& t : segment->threads()) written[t.tid] = t.written;
  for (const ThreadStats& s : result.threads) {
    uint64_t last = s.records + s.overwritten;  // seq after the last record
    EXPECT_GE(last + 1, written[s.info.tid]) << "thread " << s.info.tid;
    EXPECT_LE(last, written[s.info.tid]);
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
    rmdir(dir.c_str());
    GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno) << ")";
  }
  ChildProcess producer({kProducer, "--threads", "1", "--events", "2000000", "--go"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=256K"});
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
  umount(dir.c_str());
  rmdir(dir.c_str());
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

TEST(RecordTest, StopOnEndsRightAfterTheMatchingRecord) {
  ChildProcess producer({kProducer, "--threads", "2", "--events", "200000", "--go"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=256K"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = testing::temp_path("stop.ntr");
  ChildProcess recorder({"/bin/sh", "-c",
                         "exec " + kCli + " record " + std::to_string(pid) + " -o " + file +
                             " --stop-on 'test:rec thread==1 && seq==5000' 2>&1"},
                        {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  producer.close_stdin();
  std::string output, line;
  while (!(line = recorder.read_line()).empty()) output += line + "\n";
  int status = recorder.wait();
  producer.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("stopped on record 5000 (test:rec"), std::string::npos) << output;
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  auto result = testing::read_test_records(*trace);
  auto c = testing::check_continuity(result);
  EXPECT_EQ(c.gaps, 0u);
  EXPECT_EQ(c.next[1], 5001u);  // thread 1 ends with the match
  unlink(file.c_str());
  unlink(testing::segment_of(pid).c_str());
}

TEST(RecordTest, SnapshotOnWritesTheRingsWhenARecordMatches) {
  ChildProcess producer({kProducer, "--threads", "2", "--events", "100000", "--go"},
                        {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=256K"});
  pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  std::string file = testing::temp_path("snapon.ntr");
  ChildProcess recorder({"/bin/sh", "-c",
                         "exec " + kCli + " record " + std::to_string(pid) + " -o " + file +
                             " --snapshot-on 'test:rec thread==0 && seq==50000' 2>&1"},
                        {});
  ASSERT_TRUE(testing::wait_consumer(pid));
  producer.close_stdin();
  std::string output, line;
  while (!(line = recorder.read_line()).empty()) output += line + "\n";
  int status = recorder.wait();
  producer.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("snapshot written: " + file + ".snap1"), std::string::npos) << output;
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
  unlink(testing::segment_of(pid).c_str());
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
