// Unit tests of the pairing behind duration triggers: the table of open operations (pairs,
// replaced and evicted operations, bounded memory, threads beginning and ending at once),
// the duration histogram, the sliding percentile's warm-up and drift, and the fire limits.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "base/trigger_pairing.hpp"

namespace nanotrace::pairing {
namespace {

OpenOp op(uint64_t key, uint64_t ticks, uint16_t event = 1, uint32_t slot = 0, uint64_t seq = 0) {
  return {key, (ticks << 16) | event, OpenOp::where_of(slot, seq), 1234};
}

TEST(OpenTableTest, PairsByKey) {
  OpenTable table(64);
  ASSERT_TRUE(table.ok());
  OpenOp dropped, begun;
  EXPECT_EQ(table.begin(op(7, 100, 3, 5, 42), &dropped), OpenTable::Begin::kInserted);
  EXPECT_EQ(table.begin(op(8, 110), &dropped), OpenTable::Begin::kInserted);
  EXPECT_EQ(table.end(9, &begun), OpenTable::End::kUnmatched);
  ASSERT_EQ(table.end(7, &begun), OpenTable::End::kMatched);
  EXPECT_EQ(begun.key, 7u);
  EXPECT_EQ(begun.begin_ticks(), 100u);
  EXPECT_EQ(begun.event(), 3);
  EXPECT_EQ(begun.slot(), 5u);
  EXPECT_EQ(begun.seq(), 42u);
  EXPECT_EQ(begun.tid, 1234u);
  EXPECT_EQ(table.end(7, &begun), OpenTable::End::kUnmatched);  // closed once
  EXPECT_EQ(table.end(8, &begun), OpenTable::End::kMatched);
}

// A record keeps 48 bits of its clock value: past 2^48 ticks (days of uptime) durations and
// ages are 48-bit differences, and a begin's full value is the one nearest the clock now.
TEST(OpenTableTest, StampsPastAndAcrossTwoToThe48thTickKeepTheirTime) {
  constexpr uint64_t kWrap = uint64_t{1} << 48;
  const uint64_t begin = 5 * kWrap - 1000;  // 1,000 ticks before a wrap of the stamps
  const uint64_t end = begin + 3000;        // after it: the end's stamp is the smaller
  const OpenOp begun = op(7, begin & abi::kTsc48Mask);
  EXPECT_EQ(begun.begin_full(end), begin);
  EXPECT_EQ(begun.begin_full(begin + 40 * kWrap / 100), begin);  // an age of hours
  EXPECT_EQ(stamp_ticks_between(begun.begin_ticks(), end & abi::kTsc48Mask), 3000u);
  // An end stamped a little before its begin (another core's clock behind): 0, not 2^48.
  EXPECT_EQ(stamp_ticks_between(end & abi::kTsc48Mask, begun.begin_ticks()), 0u);
  EXPECT_EQ(stamp_ticks_between(100, 100), 0u);
}

TEST(OpenTableTest, KeyZeroAndEveryBitPatternAreKeys) {
  OpenTable table(64);
  OpenOp dropped, begun;
  for (uint64_t key : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}}) {
    EXPECT_EQ(table.begin(op(key, 50), &dropped), OpenTable::Begin::kInserted);
  }
  for (uint64_t key : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}}) {
    EXPECT_EQ(table.end(key, &begun), OpenTable::End::kMatched) << key;
  }
}

TEST(OpenTableTest, ABeginOfAnOpenKeyReplacesIt) {
  OpenTable table(64);
  OpenOp dropped, begun;
  table.begin(op(7, 100), &dropped);
  ASSERT_EQ(table.begin(op(7, 200), &dropped), OpenTable::Begin::kReplaced);
  EXPECT_EQ(dropped.begin_ticks(), 100u);
  ASSERT_EQ(table.end(7, &begun), OpenTable::End::kMatched);
  EXPECT_EQ(begun.begin_ticks(), 200u);
  EXPECT_EQ(table.end(7, &begun), OpenTable::End::kUnmatched);
}

// Begins that never end: the table keeps its size and drops the oldest, each counted.
TEST(OpenTableTest, AFloodOfBeginsEvictsTheOldestInBoundedMemory) {
  OpenTable table(1024);
  const size_t bytes = table.bytes();
  OpenOp dropped;
  uint64_t evicted = 0, oldest_dropped = 0;
  const uint64_t n = 200000;
  for (uint64_t k = 0; k < n; ++k) {
    if (table.begin(op(k, 1000 + k), &dropped) == OpenTable::Begin::kEvicted) {
      ++evicted;
      oldest_dropped = std::max(oldest_dropped, dropped.begin_ticks());
    }
  }
  EXPECT_EQ(table.bytes(), bytes);
  uint64_t open = 0, oldest = ~uint64_t{0};
  table.for_each([&](size_t, const OpenOp& o) {
    ++open;
    oldest = std::min(oldest, o.begin_ticks());
  });
  EXPECT_EQ(open + evicted, n);  // every begin is open or counted as evicted
  EXPECT_LE(open, table.capacity());
  EXPECT_GT(open, table.capacity() * 9 / 10);  // full, give or take a bucket
  // What is still open is the most recent: nothing evicted is younger than the oldest kept
  // by more than a bucket's worth of spread.
  EXPECT_GT(oldest, 1000 + n - 20 * table.capacity());
  EXPECT_GT(oldest_dropped, 1000 + n - 20 * table.capacity());
}

TEST(OpenTableTest, MarkReportedOnlyTheSameOperation) {
  OpenTable table(64);
  OpenOp dropped;
  table.begin(op(7, 100, 1, 2, 10), &dropped);
  size_t index = 0;
  OpenOp seen;
  table.for_each([&](size_t i, const OpenOp& o) {
    index = i;
    seen = o;
  });
  OpenOp begun;
  table.end(7, &begun);
  table.begin(op(7, 300, 1, 2, 11), &dropped);  // another operation, perhaps the same entry
  // The operation it named is gone: the new one is not marked in its place.
  (void)table.mark_reported(index, seen);
  table.for_each([&](size_t, const OpenOp& o) { EXPECT_FALSE(o.reported()); });
  table.for_each([&](size_t i, const OpenOp& o) { EXPECT_TRUE(table.mark_reported(i, o)); });
  table.for_each([&](size_t, const OpenOp& o) { EXPECT_TRUE(o.reported()); });
  ASSERT_EQ(table.end(7, &begun), OpenTable::End::kMatched);
  EXPECT_EQ(begun.seq(), 11u);
}

// Threads begin and end their own keys while others end keys begun elsewhere: every pair is
// matched exactly once and nothing stays open.
TEST(OpenTableTest, ThreadsPairWithoutLosingAnOperation) {
  OpenTable table(4096);
  constexpr int kThreads = 4;
  constexpr uint64_t kOps = 100000;
  std::atomic<uint64_t> matched{0}, busy{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      OpenOp dropped, begun;
      for (uint64_t i = 0; i < kOps; ++i) {
        const uint64_t key = (static_cast<uint64_t>(t) << 32) | i;
        auto b = table.begin(op(key, 1 + i, 1, static_cast<uint32_t>(t), i), &dropped);
        if (b == OpenTable::Begin::kBusy) {
          busy.fetch_add(1);
          continue;
        }
        EXPECT_EQ(b, OpenTable::Begin::kInserted);
        // End the previous key of the next thread's range when it may be open, else ours.
        auto e = table.end(key, &begun);
        if (e == OpenTable::End::kMatched) {
          EXPECT_EQ(begun.seq(), i);
          matched.fetch_add(1);
        } else {
          busy.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  uint64_t open = 0;
  table.for_each([&](size_t, const OpenOp&) { ++open; });
  EXPECT_EQ(matched.load() + busy.load(), kThreads * kOps);
  EXPECT_EQ(open, busy.load());  // only an op whose end gave up can stay open
  EXPECT_LT(busy.load(), kThreads * kOps / 1000);
}

TEST(OpenTableTest, ReleasedPagesReadAsAnEmptyTable) {
  OpenTable table(64);
  OpenOp dropped, begun;
  table.begin(op(7, 100), &dropped);
  table.release_pages();
  EXPECT_EQ(table.end(7, &begun), OpenTable::End::kUnmatched);
  EXPECT_EQ(table.begin(op(7, 100), &dropped), OpenTable::Begin::kInserted);
}

TEST(DurationHistogramTest, BucketsBoundTheirValues) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{8}, uint64_t{9},
                     uint64_t{1000}, uint64_t{123456789}, uint64_t{1} << 40, ~uint64_t{0}}) {
    const uint32_t b = DurationHistogram::bucket(v);
    ASSERT_LT(b, DurationHistogram::kBuckets) << v;
    EXPECT_GE(DurationHistogram::upper_bound(b), v) << v;
    if (b > 0) {
      EXPECT_LT(DurationHistogram::upper_bound(b - 1), v) << v;
    }
    // 12.5 % wide at most.
    EXPECT_LE(static_cast<double>(DurationHistogram::upper_bound(b)),
              static_cast<double>(v) * 1.126 + 1)
        << v;
  }
}

TEST(DurationHistogramTest, PercentileOfKnownCounts) {
  std::vector<uint64_t> counts(DurationHistogram::kBuckets, 0);
  for (uint64_t v = 1; v <= 1000; ++v) ++counts[DurationHistogram::bucket(v * 1000)];
  const uint64_t p99 = histogram_percentile(counts.data(), 1000, 99);
  EXPECT_GE(p99, 990000u);
  EXPECT_LE(p99, 990000u * 1.13);
  EXPECT_EQ(histogram_percentile(counts.data(), 0, 99), 0u);
}

// Feeds `per_epoch` pairs of `value` ticks into cumulative counts and closes an epoch.
uint64_t epoch(SlidingPercentile& s, std::vector<uint64_t>& cumulative, uint64_t value,
               uint64_t per_epoch) {
  cumulative[DurationHistogram::bucket(value)] += per_epoch;
  return s.close_epoch(cumulative.data());
}

TEST(SlidingPercentileTest, WarmsUpThenFollowsADrift) {
  SlidingPercentile s(10, 99, 1000);
  std::vector<uint64_t> cumulative(DurationHistogram::kBuckets, 0);
  EXPECT_EQ(epoch(s, cumulative, 1000, 400), SlidingPercentile::kWarmingUp);
  EXPECT_EQ(epoch(s, cumulative, 1000, 400), SlidingPercentile::kWarmingUp);
  const uint64_t warm = epoch(s, cumulative, 1000, 400);  // 1200 pairs in the window
  ASSERT_NE(warm, SlidingPercentile::kWarmingUp);
  EXPECT_GE(warm, 10000u);
  EXPECT_LE(warm, 11300u);
  // A slow drift up, 5 % an epoch: the threshold follows and the new values stay far below.
  double v = 1000;
  for (int i = 0; i < 40; ++i) {
    v *= 1.05;
    const uint64_t t = epoch(s, cumulative, static_cast<uint64_t>(v), 400);
    EXPECT_GT(t, static_cast<uint64_t>(v) * 5) << i;
  }
  // Old values leave the window: after kEpochs epochs of 1 tick, the threshold comes down.
  for (uint32_t i = 0; i < SlidingPercentile::kEpochs; ++i) epoch(s, cumulative, 1, 400);
  EXPECT_LE(s.threshold(), 10u);
}

TEST(SlidingPercentileTest, AQuietWindowWarmsUpAgain) {
  SlidingPercentile s(10, 99, 100);
  std::vector<uint64_t> cumulative(DurationHistogram::kBuckets, 0);
  EXPECT_NE(epoch(s, cumulative, 500, 1000), SlidingPercentile::kWarmingUp);
  for (uint32_t i = 0; i < SlidingPercentile::kEpochs - 1; ++i) {
    EXPECT_NE(s.close_epoch(cumulative.data()), SlidingPercentile::kWarmingUp);
  }
  EXPECT_EQ(s.close_epoch(cumulative.data()), SlidingPercentile::kWarmingUp);
}

TEST(FireLimiterTest, CapPerIntervalCountsWhatItHoldsBack) {
  FireLimiter limiter(3, 1000, 0);
  int fired = 0;
  for (uint64_t now = 0; now < 1000; now += 1) fired += limiter.admit(now) ? 1 : 0;
  EXPECT_EQ(fired, 3);
  EXPECT_EQ(limiter.held_back(), 997u);
  EXPECT_TRUE(limiter.admit(1000));  // the next interval
  EXPECT_EQ(limiter.fired(), 4u);
}

TEST(FireLimiterTest, Cooldown) {
  FireLimiter limiter(0, 0, 100);
  EXPECT_TRUE(limiter.admit(5));
  EXPECT_FALSE(limiter.admit(50));
  EXPECT_FALSE(limiter.admit(104));
  EXPECT_TRUE(limiter.admit(105));
  EXPECT_EQ(limiter.held_back(), 2u);
}

TEST(FireLimiterTest, NoLimits) {
  FireLimiter limiter(0, 0, 0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(limiter.admit(0));
  EXPECT_EQ(limiter.held_back(), 0u);
}

}  // namespace
}  // namespace nanotrace::pairing
