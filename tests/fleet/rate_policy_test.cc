// The rate policy (base/rate_policy.hpp) on a clock the test gives it: the cap per interval,
// the interval anchored at its first event, the cool-down, forced events, the counts of what
// was held back, limits changed midway, and a clock that goes back.
#include "base/rate_policy.hpp"

#include <gtest/gtest.h>

namespace nanotrace {
namespace {

using Verdict = RatePolicy::Verdict;
constexpr uint64_t kSec = 1'000'000'000ull;

TEST(RatePolicyTest, OnePerIntervalAnchoredAtTheFirstEvent) {
  RatePolicy p({1, 10 * kSec, 0});
  EXPECT_EQ(p.offer(100 * kSec), Verdict::kAdmitted);
  EXPECT_EQ(p.offer(100 * kSec), Verdict::kCapped);
  EXPECT_EQ(p.offer(109 * kSec + kSec - 1), Verdict::kCapped);  // 1 ns before the end
  EXPECT_EQ(p.peek(110 * kSec), Verdict::kAdmitted);            // peek counts nothing
  EXPECT_EQ(p.offer(113 * kSec), Verdict::kAdmitted);           // opens [113, 123)
  EXPECT_EQ(p.offer(122 * kSec), Verdict::kCapped);
  EXPECT_EQ(p.offer(123 * kSec), Verdict::kAdmitted);
  EXPECT_EQ(p.counts().admitted, 3u);
  EXPECT_EQ(p.counts().capped, 3u);
  EXPECT_EQ(p.counts().cooling_down, 0u);
  EXPECT_EQ(p.counts().held_back(), 3u);
}

TEST(RatePolicyTest, CapOfSeveralPerInterval) {
  RatePolicy p({3, kSec, 0});
  for (uint64_t t : {0ull, 10ull, 20ull}) EXPECT_EQ(p.offer(5 * kSec + t), Verdict::kAdmitted);
  EXPECT_EQ(p.offer(5 * kSec + 30), Verdict::kCapped);
  EXPECT_EQ(p.next_admit_ns(5 * kSec + 30), 6 * kSec);
  EXPECT_EQ(p.offer(6 * kSec), Verdict::kAdmitted);  // a new interval, its first
  EXPECT_EQ(p.offer(6 * kSec + 1), Verdict::kAdmitted);
  EXPECT_EQ(p.counts().admitted, 5u);
  EXPECT_EQ(p.counts().capped, 1u);
}

TEST(RatePolicyTest, CoolDownBetweenAdmittedEvents) {
  RatePolicy p({0, 0, 2 * kSec});  // no cap, a cool-down alone
  EXPECT_EQ(p.offer(kSec), Verdict::kAdmitted);
  EXPECT_EQ(p.offer(2 * kSec), Verdict::kCoolingDown);
  EXPECT_EQ(p.next_admit_ns(2 * kSec), 3 * kSec);
  EXPECT_EQ(p.offer(3 * kSec - 1), Verdict::kCoolingDown);
  // A held-back event does not restart the cool-down: only admitted ones do.
  EXPECT_EQ(p.offer(3 * kSec), Verdict::kAdmitted);
  EXPECT_EQ(p.counts().cooling_down, 2u);
  EXPECT_EQ(p.counts().capped, 0u);
}

TEST(RatePolicyTest, CapAndCoolDownTogether) {
  RatePolicy p({2, 10 * kSec, 3 * kSec});
  EXPECT_EQ(p.offer(0), Verdict::kAdmitted);
  EXPECT_EQ(p.offer(kSec), Verdict::kCoolingDown);
  EXPECT_EQ(p.offer(4 * kSec), Verdict::kAdmitted);  // the second of [0, 10)
  EXPECT_EQ(p.offer(8 * kSec), Verdict::kCapped);    // cooled down, but capped
  EXPECT_EQ(p.offer(5 * kSec), Verdict::kCoolingDown);
  EXPECT_EQ(p.next_admit_ns(5 * kSec), 10 * kSec);  // the later of the two
  EXPECT_EQ(p.offer(10 * kSec), Verdict::kAdmitted);
  EXPECT_EQ(p.counts().capped, 1u);
  EXPECT_EQ(p.counts().cooling_down, 2u);
  EXPECT_EQ(p.counts().admitted, 3u);
}

TEST(RatePolicyTest, NoLimitsAdmitEverything) {
  RatePolicy none;
  RatePolicy zero_cap({0, 10 * kSec, 0});
  for (uint64_t t = 0; t < 100; ++t) {
    EXPECT_EQ(none.offer(t), Verdict::kAdmitted);
    EXPECT_EQ(zero_cap.offer(t), Verdict::kAdmitted);
  }
  EXPECT_EQ(none.counts().held_back(), 0u);
  EXPECT_EQ(none.next_admit_ns(7), 7u);
}

TEST(RatePolicyTest, ForcedEventsHappenAndHoldBackWhatFollows) {
  RatePolicy p({1, 10 * kSec, 0});
  EXPECT_EQ(p.offer(0), Verdict::kAdmitted);
  // Within [0, 10) and over the cap: it happens, and opens [5, 15).
  p.force(5 * kSec);
  EXPECT_EQ(p.offer(12 * kSec), Verdict::kCapped);
  EXPECT_EQ(p.next_admit_ns(12 * kSec), 15 * kSec);
  EXPECT_EQ(p.offer(15 * kSec), Verdict::kAdmitted);
  // Forced with room left in the interval: it counts in the open one.
  RatePolicy q({2, 10 * kSec, 0});
  q.force(0);
  EXPECT_EQ(q.offer(kSec), Verdict::kAdmitted);
  EXPECT_EQ(q.offer(2 * kSec), Verdict::kCapped);
  EXPECT_EQ(q.next_admit_ns(2 * kSec), 10 * kSec);
  EXPECT_EQ(p.counts().forced, 1u);
  EXPECT_EQ(p.counts().admitted, 3u);
  EXPECT_EQ(q.counts().forced, 1u);
}

TEST(RatePolicyTest, LimitsChangedMidway) {
  RatePolicy p({1, 10 * kSec, 0});
  EXPECT_EQ(p.offer(0), Verdict::kAdmitted);
  EXPECT_EQ(p.offer(3 * kSec), Verdict::kCapped);
  p.set_limits({1, 2 * kSec, 0});  // a shorter interval ends the current one at once
  EXPECT_EQ(p.peek(3 * kSec), Verdict::kAdmitted);
  p.set_limits({1, 60 * kSec, 0});  // a longer one holds back longer
  EXPECT_EQ(p.offer(30 * kSec), Verdict::kCapped);
  EXPECT_EQ(p.next_admit_ns(30 * kSec), 60 * kSec);
  EXPECT_EQ(p.limits().interval_ns, 60 * kSec);
}

TEST(RatePolicyTest, AClockThatGoesBackHoldsBackRatherThanWrapping) {
  RatePolicy p({1, 10 * kSec, kSec});
  EXPECT_EQ(p.offer(100 * kSec), Verdict::kAdmitted);
  // Earlier than the interval's start: not a huge elapsed time (no unsigned wrap), held back.
  EXPECT_EQ(p.offer(50 * kSec), Verdict::kCoolingDown);
  EXPECT_EQ(p.next_admit_ns(50 * kSec), 110 * kSec);
}

}  // namespace
}  // namespace nanotrace
