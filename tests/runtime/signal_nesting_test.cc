// A tracepoint in a signal handler that interrupts a tracepoint on the same thread: every
// record either reads back intact or is counted lost, and the ring is never corrupted.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <map>

#include "common/child_process.hpp"
#include "common/records.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

void run_nested(const std::string& mode, const std::string& buffer) {
  testing::ChildProcess child(
      {std::string(NANOTRACE_BIN_DIR) + "/nanotrace_signal_producer", "10000", "50"},
      {"NANOTRACE_MODE=" + mode, "NANOTRACE_BUFFER=" + buffer});
  std::string line = child.read_line();
  ASSERT_EQ(line.rfind("pid ", 0), 0u) << line;
  pid_t pid = static_cast<pid_t>(std::stol(line.substr(4)));
  unsigned long long loop = 0, handler = 0;
  line = child.read_line();
  ASSERT_EQ(std::sscanf(line.c_str(), "attempted %llu %llu", &loop, &handler), 2) << line;
  ASSERT_EQ(child.read_line(), "ready");
  EXPECT_GE(handler, 10000u) << "the loop ended before the signals it waits for";
  auto trace = Trace::open_pid(pid);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  testing::ReadResult r = testing::read_test_records(**trace);
  EXPECT_EQ(r.bad_checksums, 0u);
  EXPECT_EQ(r.other_events, 0u);
  uint64_t lost = (*trace)->process().lost_no_slot + (*trace)->process().lost_reclaimed;
  uint64_t corrupt = 0;
  for (const ThreadStats& s : r.threads) {
    lost += s.lost();
    corrupt += s.corrupt_blocks;
  }
  EXPECT_EQ(corrupt, 0u);
  EXPECT_EQ(r.records.size() + lost, loop + handler)
      << "read " << r.records.size() << ", lost " << lost << ", attempted " << loop << " + "
      << handler;
  // In ring order each source's numbers only grow, and so do the reader's record numbers.
  std::map<uint64_t, uint64_t> next;
  uint64_t disorder = 0, seq_disorder = 0, last_record_seq = 0;
  bool first = true;
  for (const testing::TestRecord& t : r.records) {
    auto it = next.find(t.thread);
    if (it != next.end() && t.seq < it->second) ++disorder;
    next[t.thread] = t.seq + 1;
    if (!first && t.record_seq <= last_record_seq) ++seq_disorder;
    last_record_seq = t.record_seq;
    first = false;
  }
  EXPECT_EQ(disorder, 0u);
  EXPECT_EQ(seq_disorder, 0u);
  const ThreadInfo& info = r.threads.at(0).info;
  // The slot's own counts agree with what was attempted; a handler that interrupted the
  // thread's very first event (its slot not yet claimed) is counted for the process.
  EXPECT_EQ(info.written + info.dropped + (*trace)->process().lost_no_slot, loop + handler);
  child.close_stdin();
  int status = child.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(SignalNestingTest, OverwriteModeKeepsRingsIntactAndCountsEveryRecord) {
  run_nested("overwrite", "1M");
}

TEST(SignalNestingTest, DiscardModeKeepsRingsIntactAndCountsEveryRecord) {
  run_nested("discard", "4M");
}

}  // namespace
}  // namespace nanotrace
