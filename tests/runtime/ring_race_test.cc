// A reader racing a writer in overwrite mode: the producer laps its ring as fast as it can
// while this test reads it a fixed number of times. No record may come back torn
// or overwritten (each carries its own checksum), and the per-thread loss count must match
// the gaps in the sequence numbers.
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "common/child_process.hpp"
#include "common/records.hpp"

namespace nanotrace {
namespace {

TEST(RingRaceTest, ReaderNeverReturnsATornRecord) {
  testing::ChildProcess child(
      {std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer", "--threads", "2", "--forever"},
      {"NANOTRACE_MODE=overwrite", "NANOTRACE_BUFFER=64K"});
  pid_t pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
  auto trace = Trace::open_pid(pid);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  // The race starts once the producer's threads write (a deadline, not a measure).
  auto started = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (testing::read_test_records(**trace).records.empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), started) << "the producer wrote nothing";
  }
  const uint64_t kPasses = 2000;
  uint64_t passes = 0, records = 0;
  while (passes < kPasses) {
    auto result = testing::read_test_records(**trace);
    ASSERT_EQ(result.bad_checksums, 0u) << "pass " << passes;
    // Within one pass each thread's records are contiguous except where loss was counted.
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> first_last;
    std::map<uint32_t, uint64_t> count;
    for (const auto& r : result.records) {
      ASSERT_EQ(r.record_seq, r.seq);
      auto it = first_last.find(r.stream);
      if (it == first_last.end()) {
        first_last[r.stream] = {r.seq, r.seq};
      } else {
        ASSERT_GT(r.seq, it->second.second);
        it->second.second = r.seq;
      }
      ++count[r.stream];
    }
    for (const auto& [stream, fl] : first_last) {
      const ThreadStats& s = result.threads[stream];
      // record_seq == payload seq above makes every gap exact; here: everything up to the
      // last record returned is either returned or counted lost, and nothing more than was
      // written (the writer keeps going, so blocks skipped after it may be counted too).
      EXPECT_GE(s.overwritten + s.records, fl.second + 1);
      EXPECT_LE(s.overwritten + s.records, s.info.written + 1);
      EXPECT_EQ(s.records, count[stream]);
      EXPECT_EQ(s.corrupt_blocks, 0u);
    }
    records += result.records.size();
    ++passes;
  }
  child.close_stdin();
  child.wait();
  EXPECT_GT(records, 10000u);
}

}  // namespace
}  // namespace nanotrace
