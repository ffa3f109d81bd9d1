// A trigger's time window ends at the match plus the window, whether or not the process
// writes again: never before the deadline, and at it within the wake-up of a thread (the
// runtime's control thread ends it when no writer does), stamped with the deadline. Records
// begun after the deadline are never kept. A count window, which only records can fill, is
// not ended by the clock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <thread>

#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using Clock = std::chrono::steady_clock;

void emit(uint64_t x) { NANOTRACE(test, win, "x={}", x); }

// Waits for the freeze, at most `limit` (a bound for the test to end, far beyond the bounds
// checked). Returns when it saw it.
Clock::time_point wait_frozen(std::chrono::milliseconds limit) {
  const auto give_up = Clock::now() + limit;
  while (!frozen() && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return Clock::now();
}

struct Facts {
  TriggerInfo trigger;
  uint64_t match_ns = 0, frozen_ns = 0;
  std::vector<uint64_t> after;  // x of the records stamped after the match
};

Facts read_own_segment() {
  Facts f;
  auto trace = Trace::open_pid(getpid());
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  if (!trace.ok()) return f;
  f.trigger = (*trace)->process().trigger;
  f.match_ns = (*trace)->ticks_to_ns(f.trigger.ticks);
  f.frozen_ns = (*trace)->ticks_to_ns(f.trigger.frozen_ticks);
  auto source = (*trace)->read_all();
  Record r;
  while (source->next(&r)) {
    if (r.event != nullptr && r.event->full_name() == "test:win" && r.ticks > f.trigger.ticks) {
      f.after.push_back(r.values[0].bits);
    }
  }
  return f;
}

// The bound on how late a freeze may land past its deadline: the wake-up of a thread on a
// loaded machine. Correctness (it took a second or forever before), not a performance figure.
constexpr uint64_t kLateNs = 200'000'000;

// The freeze is stamped with the deadline: nothing begun after it is kept, whoever froze the
// rings. (The reader converts with the tick rate it measures now, not quite the process's at
// the firing: 1 % of the window, far above their difference.)
void expect_stamped_at_deadline(const Facts& f, uint64_t window_ns) {
  const int64_t frozen_after = static_cast<int64_t>(f.frozen_ns) - static_cast<int64_t>(f.match_ns);
  EXPECT_NEAR(frozen_after, static_cast<int64_t>(window_ns), window_ns / 100);
}

TEST(TriggerWindowTest, TimeWindowEndsAtTheDeadlineWithoutAnotherRecord) {
  emit(0);  // this process's segment and ring exist from here on
  const uint64_t kWindowNs = 500'000;
  TriggerWindow window;
  window.after_ns = kWindowNs;
  ASSERT_TRUE(arm_trigger("test:win x==1", window).ok());
  emit(1);
  const auto matched = Clock::now();  // after the match: this thread may be preempted before
  const auto seen = wait_frozen(std::chrono::seconds(10));
  ASSERT_TRUE(frozen()) << "the window never ended";
  EXPECT_LT(seen - matched, std::chrono::nanoseconds(kWindowNs + kLateNs));
  emit(2);  // after the freeze: dropped
  Facts f = read_own_segment();
  EXPECT_EQ(f.trigger.state, abi::TriggerState::kFrozen);
  expect_stamped_at_deadline(f, kWindowNs);
  EXPECT_TRUE(f.after.empty()) << f.after.size()
                               << " records after the match, first x=" << f.after.front();
  ASSERT_TRUE(resume().ok());
  ASSERT_TRUE(disarm_trigger().ok());
}

// A record written inside the window is kept; one begun after the deadline, with the rings not
// frozen yet by anyone, never is; and the window is not cut short.
TEST(TriggerWindowTest, LongerTimeWindowIsNeitherCutShortNorOverrun) {
  emit(0);
  const uint64_t kWindowNs = 300'000'000;
  TriggerWindow window;
  window.after_ns = kWindowNs;
  ASSERT_TRUE(arm_trigger("test:win x==1", window).ok());
  const auto before_match = Clock::now();
  emit(1);
  emit(3);  // inside the window
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(frozen()) << "froze before the deadline";
  emit(4);  // still inside: at least 100 ms before the deadline
  wait_frozen(std::chrono::seconds(10));
  ASSERT_TRUE(frozen()) << "the window never ended";
  EXPECT_GE(Clock::now() - before_match, std::chrono::nanoseconds(kWindowNs));
  emit(5);
  Facts f = read_own_segment();
  expect_stamped_at_deadline(f, kWindowNs);
  EXPECT_EQ(f.after, (std::vector<uint64_t>{3, 4}));
  ASSERT_TRUE(resume().ok());
  ASSERT_TRUE(disarm_trigger().ok());
}

// Only records fill a count window: with none written, it stays open (nothing to keep, and
// nothing lost), and the next records fill it.
TEST(TriggerWindowTest, CountWindowWaitsForItsRecords) {
  emit(0);
  TriggerWindow window;
  window.after_events = 2;
  ASSERT_TRUE(arm_trigger("test:win x==1", window).ok());
  emit(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(frozen());
  emit(3);
  emit(4);
  EXPECT_FALSE(frozen());
  emit(5);  // past the window: freezes, dropped
  EXPECT_TRUE(frozen());
  Facts f = read_own_segment();
  EXPECT_EQ(f.after, (std::vector<uint64_t>{3, 4}));
  ASSERT_TRUE(resume().ok());
  ASSERT_TRUE(disarm_trigger().ok());
}

}  // namespace
}  // namespace nanotrace
