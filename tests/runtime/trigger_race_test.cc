// The trigger's firing protocol against threads that act on what they saw a round earlier,
// forced deterministically with the runtime's test hook (runtime.hpp, TriggerHookPoint): a
// writer paused where a descheduled one could be, while the others fire, fill the window,
// freeze and resume. A thread that saw a firing must not complete it once its round is over
// (that made a firing of nothing, stamped at the wrong time, and a window thousands of
// records too long), and a thread that saw the window end must not freeze the next round's.
#include <gtest/gtest.h>
#include <semaphore.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>
#include <vector>

#include "nanotrace/reader.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace {
namespace {

using runtime::TriggerHookPoint;

void emit_match(uint64_t x) { NANOTRACE(test, race, "x={}", x); }
void emit_other(uint64_t y) { NANOTRACE(test, other, "y={}", y); }

// The hook pauses a thread that asked for it (t_pause_at) at that point: it posts
// paused[point] and waits for go[point].
constexpr int kPoints = static_cast<int>(TriggerHookPoint::kCount);
struct Pause {
  sem_t paused[kPoints], go[kPoints];
  Pause() {
    for (int i = 0; i < kPoints; ++i) {
      sem_init(&paused[i], 0, 0);
      sem_init(&go[i], 0, 0);
    }
  }
  ~Pause() {
    for (int i = 0; i < kPoints; ++i) {
      sem_destroy(&paused[i]);
      sem_destroy(&go[i]);
    }
  }
  void wait_paused(TriggerHookPoint p) {
    while (sem_wait(&paused[static_cast<int>(p)]) != 0) {
    }
  }
  void let_go(TriggerHookPoint p) { sem_post(&go[static_cast<int>(p)]); }
};
Pause* g_pause = nullptr;
thread_local TriggerHookPoint t_pause_at = TriggerHookPoint::kNone;

void hook(TriggerHookPoint point) {
  if (point != t_pause_at) return;
  t_pause_at = TriggerHookPoint::kNone;  // once
  sem_post(&g_pause->paused[static_cast<int>(point)]);
  while (sem_wait(&g_pause->go[static_cast<int>(point)]) != 0) {
  }
}

class TriggerRaceTest : public testing::Test {
 protected:
  void SetUp() override {
    emit_other(0);  // this process's segment and the main thread's ring exist from here on
    g_pause = &pause_;
    runtime::g_trigger_test_hook.store(hook);
  }
  void TearDown() override {
    runtime::g_trigger_test_hook.store(nullptr);
    if (frozen()) (void)resume();
    (void)disarm_trigger();
    g_pause = nullptr;
  }
  // The clock values of this process's test:race records of value x.
  static std::vector<uint64_t> match_stamps(uint64_t x) {
    std::vector<uint64_t> stamps;
    auto trace = Trace::open_pid(getpid());
    EXPECT_TRUE(trace.ok()) << trace.status().message();
    if (!trace.ok()) return stamps;
    auto source = (*trace)->read_all();
    Record r;
    while (source->next(&r)) {
      if (r.event != nullptr && r.event->full_name() == "test:race" && r.values[0].bits == x) {
        stamps.push_back(r.ticks);
      }
    }
    return stamps;
  }
  static TriggerInfo trigger_facts() {
    auto trace = Trace::open_pid(getpid());
    EXPECT_TRUE(trace.ok()) << trace.status().message();
    return trace.ok() ? (*trace)->process().trigger : TriggerInfo{};
  }
  // A value of x no other case (or repetition) matches on.
  static uint64_t new_x() {
    static uint64_t last = 0;
    return ++last;
  }
  Pause pause_;
};

// A writer sees the firing (it reaches its slow path between the match and the switch) and is
// descheduled there; the firing completes, its window fills, the rings freeze and are resumed.
// When the writer runs again, the round it saw is over: it must not complete a firing.
TEST_F(TriggerRaceTest, WriterThatSawAnOldFiringDoesNotCompleteOne) {
  const uint64_t x = new_x();
  TriggerWindow window;
  window.after_events = 3;
  ASSERT_TRUE(arm_trigger("test:race x==" + std::to_string(x), window).ok());
  // The matching thread stops between announcing its firing and completing it.
  std::thread matcher([x] {
    t_pause_at = TriggerHookPoint::kFiringAnnounced;
    emit_match(x);
  });
  pause_.wait_paused(TriggerHookPoint::kFiringAnnounced);
  // A new thread's first record goes through the slow path: it sees the firing, and stops.
  std::thread late([] {
    t_pause_at = TriggerHookPoint::kGateSawFiring;
    emit_other(100);
  });
  pause_.wait_paused(TriggerHookPoint::kGateSawFiring);
  pause_.let_go(TriggerHookPoint::kFiringAnnounced);  // the matcher completes its firing
  matcher.join();
  for (uint64_t y = 1; y <= 4; ++y) emit_other(y);  // three in the window, one past it
  ASSERT_TRUE(frozen());
  const TriggerInfo fired = trigger_facts();
  ASSERT_EQ(fired.state, abi::TriggerState::kFrozen);
  ASSERT_TRUE(resume().ok());
  pause_.let_go(TriggerHookPoint::kGateSawFiring);  // the late writer goes on, next round
  late.join();
  EXPECT_EQ(trigger_facts().state, abi::TriggerState::kArmed) << "a firing without a match";
  // The matching record keeps the stamp of its firing (a completion of it in a later round
  // stamped it again, in a ring that may have moved on).
  EXPECT_EQ(match_stamps(x), std::vector<uint64_t>{fired.ticks});
  // The trigger still fires, once, and its window is exact.
  std::thread again([x] { emit_match(x); });
  again.join();
  for (uint64_t y = 5; y <= 7; ++y) emit_other(y);
  EXPECT_FALSE(frozen());
  emit_other(8);
  EXPECT_TRUE(frozen());
}

// The firing thread itself is descheduled between announcing its firing and completing it
// (the likeliest case: in the trigger-lag program it runs at SCHED_IDLE beside a build); a
// writer completes the firing for it, the window fills, the rings freeze and are resumed.
// When the firing thread runs again, its firing is long done: it must not complete another.
TEST_F(TriggerRaceTest, FiringThreadDescheduledUntilTheNextRoundDoesNotCompleteAgain) {
  const uint64_t x = new_x();
  TriggerWindow window;
  window.after_events = 3;
  ASSERT_TRUE(arm_trigger("test:race x==" + std::to_string(x), window).ok());
  std::thread matcher([x] {
    t_pause_at = TriggerHookPoint::kFiringAnnounced;
    emit_match(x);
  });
  pause_.wait_paused(TriggerHookPoint::kFiringAnnounced);
  // A new thread's first record goes through the slow path, completes the firing and is the
  // first of the window.
  std::thread([] { emit_other(100); }).join();
  ASSERT_EQ(trigger_facts().state, abi::TriggerState::kFired);
  emit_other(1);
  emit_other(2);  // the rest of the window
  EXPECT_FALSE(frozen());
  emit_other(3);
  ASSERT_TRUE(frozen());
  const TriggerInfo fired = trigger_facts();
  ASSERT_TRUE(resume().ok());
  pause_.let_go(TriggerHookPoint::kFiringAnnounced);  // the firing thread goes on
  matcher.join();
  EXPECT_EQ(trigger_facts().state, abi::TriggerState::kArmed) << "a firing without a match";
  EXPECT_EQ(match_stamps(x), std::vector<uint64_t>{fired.ticks});
}

// A writer finds the window over and is descheduled before it freezes the rings; another
// freezes them, they are resumed, and the trigger fires again. When the writer runs again, the
// window it saw end is not this one: the new window must not end before its records.
TEST_F(TriggerRaceTest, WriterThatSawAnOldWindowEndDoesNotEndTheNextOne) {
  const uint64_t x = new_x();
  TriggerWindow window;
  window.after_events = 3;
  ASSERT_TRUE(arm_trigger("test:race x==" + std::to_string(x), window).ok());
  // A thread with its ring claimed before the match, so its next record is counted.
  sem_t claimed, write;
  sem_init(&claimed, 0, 0);
  sem_init(&write, 0, 0);
  std::thread late([&] {
    emit_other(100);
    sem_post(&claimed);
    sem_wait(&write);
    t_pause_at = TriggerHookPoint::kGateEndsWindow;
    emit_other(101);  // past the first window: stops before freezing
  });
  sem_wait(&claimed);
  emit_match(x);
  for (uint64_t y = 1; y <= 3; ++y) emit_other(y);  // the window
  sem_post(&write);
  pause_.wait_paused(TriggerHookPoint::kGateEndsWindow);
  emit_other(4);  // past the window: this thread freezes the rings
  ASSERT_TRUE(frozen());
  ASSERT_TRUE(resume().ok());
  emit_match(x);  // the second firing, with a window of 3 again
  const TriggerInfo second = trigger_facts();
  ASSERT_EQ(second.state, abi::TriggerState::kFired);
  pause_.let_go(TriggerHookPoint::kGateEndsWindow);
  late.join();  // its record is one of the new window's
  EXPECT_FALSE(frozen()) << "the new window ended at its match";
  emit_other(5);
  emit_other(6);
  EXPECT_FALSE(frozen());
  emit_other(7);
  EXPECT_TRUE(frozen());
  sem_destroy(&claimed);
  sem_destroy(&write);
}

}  // namespace
}  // namespace nanotrace
