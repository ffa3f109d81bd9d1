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
  EXPECT_EQ(reps[0].overall.count, 3u * 500 * 8 + 2);
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

// PairMatcher keeps latencies in 4 bytes while they fit and in 8 from the first that does
// not: its report and latencies() must not depend on which, nor on when latencies() is asked
// (which moves them to 8 bytes). Latencies past 2^32 ns come from shifting the clock of the
// second half of the records by 5 s.
TEST(LatencyColumnsTest, StatsAlikeInNarrowAndWideStorage) {
  std::string segment = run_program("NANOTRACE_BUFFER=16M", "50");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  std::vector<Record> records;
  auto source = (*trace)->read_all();
  Record r;
  while (source->next(&r)) records.push_back(r);
  const std::vector<ThreadStats> threads = source->threads();
  const PairRule rule{"pair:begin", "pair:end", "id"};
  auto report = [&](uint64_t shift, bool ask_first, std::vector<uint64_t>* latencies) {
    auto m = PairMatcher::create(**trace, rule, "", 3);
    EXPECT_TRUE(m.ok());
    if (ask_first) (void)(*m)->latencies();
    for (size_t i = 0; i < records.size(); ++i) {
      Record copy = records[i];
      if (i >= records.size() / 2) copy.time_ns += shift;
      (*m)->add(copy, threads);
    }
    LatencyReport rep = (*m)->finish();
    latencies->assign((*m)->latencies().begin(), (*m)->latencies().end());
    return rep;
  };
  for (uint64_t shift : {uint64_t{0}, uint64_t{5'000'000'000}}) {
    const std::string what = "shift " + std::to_string(shift);
    std::vector<uint64_t> narrow_first, wide_first;
    LatencyReport a = report(shift, false, &narrow_first);
    LatencyReport b = report(shift, true, &wide_first);
    EXPECT_GT(a.overall.count, 1000u) << what;
    EXPECT_EQ(a.overall.max_ns > UINT32_MAX, shift != 0) << what;
    EXPECT_EQ(narrow_first, wide_first) << what;
    expect_same_stats(a.overall, b.overall, what);
    std::vector<uint64_t> copy = narrow_first;
    LatencyStats direct = compute_latency_stats(&copy);
    direct.unmatched_begins = a.overall.unmatched_begins;  // set by finish()
    expect_same_stats(a.overall, direct, what);
    ASSERT_EQ(a.top.size(), b.top.size());
    for (size_t i = 0; i < a.top.size(); ++i) EXPECT_EQ(a.top[i].latency_ns, b.top[i].latency_ns);
  }
  std::filesystem::remove(segment);
}

}  // namespace
}  // namespace nanotrace
