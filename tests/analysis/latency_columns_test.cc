// analyze_latency, which feeds the interval matcher from the columnar reader, against the
// record-by-record path (PairMatcher::add on Trace::read_all, as `latency` did before) on
// pairs_program's traces: integer and string keys (8-byte strings meet integers with the same
// bytes), pairs across threads, several call sites and layouts of one event, other events in
// between, and losses (overwritten rings: sequence gaps placed in the stream; a discarding
// writer's drops: losses that cannot be placed), in a live segment and in a trace file
// (latency_compare.hpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/latency_compare.hpp"

namespace nanotrace {
namespace {

using namespace latency_test;

TEST(LatencyColumnsTest, SameAsRecordByRecordWithoutLoss) {
  std::string segment = run_program("NANOTRACE_BUFFER=16M", "500");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  std::vector<LatencyReport> reps = expect_same(**trace);
  // What the program did, so that the comparison is not between two empty reports.
  EXPECT_EQ(reps[0].overall.count, 3u * 500 * 8);
  EXPECT_EQ(reps[0].unmatched_ends, 20u);
  EXPECT_EQ(reps[0].overall.unmatched_begins, 20u);
  EXPECT_EQ(reps[1].groups.size(), 3u);              // sda, sdb, nvme0n1
  EXPECT_GT(reps[2].overall.unmatched_begins, 20u);  // names repeat: begins replaced
  EXPECT_GT(reps[4].overall.count, 0u);              // 8-byte strings met integers
  EXPECT_EQ(reps[0].lost_adjacent_pairs + reps[0].lost_adjacent_unmatched, 0u);
  std::filesystem::remove(segment);
}

TEST(LatencyColumnsTest, SameAsRecordByRecordWithOverwrittenRecords) {
  // Overwritten rings: each thread's first records are gone (sequence gaps).
  std::string segment = run_program("NANOTRACE_BUFFER=64K", "3000");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  std::vector<LatencyReport> reps = expect_same(**trace);
  EXPECT_GT(reps[0].lost_adjacent_pairs + reps[0].lost_adjacent_unmatched, 0u);
  // The same records from a trace file.
  const std::string file = "/tmp/nanotrace-latency-columns-" + std::to_string(getpid()) + ".ntr";
  int code = 0;
  std::string out =
      testing::run_command(kBin + "/nanotrace recover " + segment + " -o " + file, &code);
  ASSERT_EQ(code, 0) << out;
  auto from_file = Trace::open(file);
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  expect_same(**from_file);
  std::filesystem::remove(file);
  std::filesystem::remove(segment);
}

TEST(LatencyColumnsTest, SameAsRecordByRecordWithDroppedRecords) {
  // A discarding writer's drops leave no gap: every unmatched record is lost-adjacent.
  std::string segment = run_program("NANOTRACE_BUFFER=64K NANOTRACE_MODE=discard", "3000");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  std::vector<LatencyReport> reps = expect_same(**trace);
  EXPECT_GT(reps[0].lost_adjacent_unmatched, 0u);
  std::filesystem::remove(segment);
}

}  // namespace
}  // namespace nanotrace
