// The latency comparison of latency_columns_test.cc on a trace file of several processes
// (`nanotrace run` of two pairs_program processes under a shell): thread streams of every
// process, merged, with the event ids the processes share.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "analysis/latency_compare.hpp"
#include "nanotrace/columns.hpp"

namespace nanotrace {
namespace {

using namespace latency_test;

TEST(LatencyProcessesTest, SameAsRecordByRecordAcrossProcesses) {
  const std::string file = "/tmp/nanotrace-latency-processes-" + std::to_string(getpid()) + ".ntr";
  int code = 0;
  std::string out = testing::run_command(kBin + "/nanotrace run -o " + file + " -- sh -c '" + kBin +
                                             "/pairs_program --rounds 200 & " + kBin +
                                             "/pairs_program --rounds 300; wait' 2>&1",
                                         &code);
  ASSERT_EQ(code, 0) << out;
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_GE((*trace)->processes().size(), 3u);  // the shell and both programs
  std::vector<LatencyReport> reps = expect_same(**trace);
  EXPECT_EQ(reps[0].begins, (200u + 300u) * 3 * 8 + 2 * (20 + 2));
  // The columns name each thread's own process, not the first process's.
  auto columns = read_columns(**trace);
  ASSERT_TRUE(columns.ok()) << columns.status().message();
  ASSERT_EQ(columns->thread_pid.size(), columns->threads.size());
  std::set<uint32_t> pids;
  for (size_t t = 0; t < columns->threads.size(); ++t) {
    const ThreadInfo& info = columns->threads[t].info;
    EXPECT_EQ(columns->thread_pid[t], (*trace)->processes()[info.process].pid) << info.name;
    pids.insert(columns->thread_pid[t]);
  }
  EXPECT_EQ(pids.size(), 2u);  // both programs (the shell wrote no record)
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace nanotrace
