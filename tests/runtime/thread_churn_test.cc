// Thread churn: thousands of short-lived threads must not grow the segment. Slots of exited
// threads are reused, and the records they held are accounted as lost. Threads that start
// together each get a slot.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>

#include "common/child_process.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

TEST(ThreadChurnTest, SegmentStaysBoundedAndLossIsCounted) {
  const uint64_t churn = 3000;
  testing::ChildProcess child({std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer",
                               "--churn", std::to_string(churn), "--hold"},
                              {"NANOTRACE_BUFFER=64K", "NANOTRACE_THREADS=32"});
  pid_t pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
  ASSERT_EQ(child.read_line(), "ready");
  auto trace = Trace::open_pid(pid);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const ProcessInfo& p = (*trace)->process();
  EXPECT_EQ(p.max_threads, 32u);
  struct stat st;
  ASSERT_EQ(stat(testing::segment_of(pid).c_str(), &st), 0);
  // Size fixed at creation; memory in use bounded by the slots (32 rings of 64 KiB + tables).
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), p.segment_size);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, p.segment_size);
  EXPECT_LT(p.segment_size, 8u << 20);
  std::vector<ThreadInfo> threads = (*trace)->threads();
  EXPECT_LE(threads.size(), 32u);
  auto source = (*trace)->read_all();
  Record r;
  uint64_t records = 0;
  while (source->next(&r)) records += r.event->full_name() == "test:churn";
  // Every churn thread wrote 3 records: what is still readable plus what was counted lost
  // when slots were reused adds up exactly.
  EXPECT_EQ(records + p.lost_reclaimed + p.lost_no_slot, churn * 3);
  EXPECT_GT(p.lost_reclaimed, 0u);
  child.close_stdin();
  child.wait();
}

// Many threads whose first events race for slots: each gets one of its own (a claimer that
// loses a slot to another goes on to the next free one), and no record is lost.
TEST(ThreadChurnTest, ThreadsStartingTogetherEachGetASlot) {
  const uint64_t threads = 200, events = 50;
  testing::ChildProcess child(
      {std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer", "--threads",
       std::to_string(threads), "--events", std::to_string(events), "--together", "--hold"},
      {"NANOTRACE_BUFFER=1M", "NANOTRACE_THREADS=256"});
  pid_t pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
  ASSERT_EQ(child.read_line(), "ready");
  auto trace = Trace::open_pid(pid);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const ProcessInfo& p = (*trace)->process();
  EXPECT_EQ(p.lost_no_slot, 0u);
  EXPECT_EQ(p.lost_reclaimed, 0u);
  std::vector<ThreadInfo> infos = (*trace)->threads();
  std::set<uint32_t> tids;
  for (const ThreadInfo& t : infos) tids.insert(t.tid);
  EXPECT_EQ(infos.size(), threads);  // the main thread traced nothing
  EXPECT_EQ(tids.size(), threads);
  auto source = (*trace)->read_all();
  Record r;
  uint64_t records = 0;
  while (source->next(&r)) records += r.event->full_name() == "test:rec";
  EXPECT_EQ(records, threads * events);
  child.close_stdin();
  child.wait();
}

}  // namespace
}  // namespace nanotrace
