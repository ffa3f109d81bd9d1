// Times of a process that exited young: its kept segment's records convert with the rate of
// its own two clock pairs (the start pair and the one taken at exit), however close they are,
// so every reader finds the same times; before, a reader measured the rate against its own
// clock and two readers could differ by tens of nanoseconds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "common/child_process.hpp"
#include "nanotrace/abi.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

const std::string kBin = NANOTRACE_BIN_DIR;

std::vector<std::pair<uint64_t, uint64_t>> ticks_and_times(const std::string& segment) {
  auto trace = Trace::open(segment);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (!trace.ok()) return out;
  auto source = (*trace)->read_all();
  Record r;
  while (source->next(&r)) out.push_back({r.ticks, r.time_ns});
  return out;
}

TEST(ClockScaleTest, AProcessThatExitedYoungHasTheTimesOfItsOwnClockPairs) {
  std::string segment = testing::run_keeping_segment(kBin + "/export_helper --pairs 50");
  ASSERT_FALSE(segment.empty());
  abi::SegmentHeader h;
  int fd = ::open(segment.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  ASSERT_EQ(h.state, static_cast<uint32_t>(abi::ProcessState::kExited));
  if (h.clock_kind != static_cast<uint32_t>(abi::ClockKind::kTsc)) {
    ::close(fd);
    std::remove(segment.c_str());
    GTEST_SKIP() << "this machine's TSC is not invariant: its clock is CLOCK_MONOTONIC";
  }
  // As if it had lived 400 us with a 3 GHz counter, and never measured its rate.
  abi::ClockPair exit_pair = h.clock_start;
  exit_pair.monotonic_ns += 400000;
  exit_pair.realtime_ns += 400000;
  exit_pair.ticks += 1200000;
  const uint64_t no_rate = 0;
  ASSERT_EQ(::pwrite(fd, &exit_pair, sizeof(exit_pair), offsetof(abi::SegmentHeader, clock_latest)),
            static_cast<ssize_t>(sizeof(exit_pair)));
  ASSERT_EQ(::pwrite(fd, &no_rate, sizeof(no_rate), offsetof(abi::SegmentHeader, ticks_per_second)),
            static_cast<ssize_t>(sizeof(no_rate)));
  ::close(fd);

  std::vector<std::pair<uint64_t, uint64_t>> first = ticks_and_times(segment);
  ASSERT_GT(first.size(), 100u);
  for (const auto& [ticks, time_ns] : first) {
    const double expected = static_cast<double>(ticks - h.clock_start.ticks) / 3.0;
    EXPECT_NEAR(static_cast<double>(time_ns), expected, 1.0) << "ticks " << ticks;
  }
  usleep(20000);  // a reader measuring against its own clock would find another rate now
  EXPECT_EQ(ticks_and_times(segment), first);
  std::remove(segment.c_str());
}

}  // namespace
}  // namespace nanotrace
