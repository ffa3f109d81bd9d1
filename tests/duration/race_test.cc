// A duration trigger's firing against a writer that acts on what it saw a round earlier,
// forced with the runtime's test hook (runtime.hpp, TriggerHookPoint): a writer that found a
// slow pair is paused before it takes the token (kSlowPairFound), or one that wrote a begin
// before it opens the operation (kDurationBegin), as a descheduled one could be, while
// another pair fires the trigger, the rings freeze and are resumed (or the trigger is armed
// again). When the writer runs again, the round it saw is over: it must not fire the next
// one, which still fires on its own slow pair or stuck operation.
#include <gtest/gtest.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>

#include "nanotrace/reader.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace {
namespace {

using runtime::TriggerHookPoint;

constexpr const char* kTrigger = "race:begin..race:end by req > 2ms";

void emit_begin(uint64_t req) { NANOTRACE(race, begin, "req={}", req); }
void emit_end(uint64_t req) { NANOTRACE(race, end, "req={}", req); }

// A pair of `req` longer than the threshold.
void slow_pair(uint64_t req) {
  emit_begin(req);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  emit_end(req);
}

sem_t g_paused, g_go;
std::atomic<bool> g_pause_next{false};
std::atomic<TriggerHookPoint> g_pause_at{TriggerHookPoint::kSlowPairFound};

// Pauses the first writer that reaches g_pause_at once g_pause_next is set.
void hook(TriggerHookPoint point) {
  if (point != g_pause_at.load() || !g_pause_next.exchange(false)) return;
  sem_post(&g_paused);
  while (sem_wait(&g_go) != 0) {
  }
}

TriggerInfo trigger_facts() {
  auto trace = Trace::open_pid(getpid());
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? (*trace)->process().trigger : TriggerInfo{};
}

class DurationRaceTest : public testing::Test {
 protected:
  void SetUp() override {
    emit_begin(0);  // this process's segment and the events exist from here on
    emit_end(0);
    sem_init(&g_paused, 0, 0);
    sem_init(&g_go, 0, 0);
    runtime::g_trigger_test_hook.store(hook);
    ASSERT_TRUE(arm_trigger(kTrigger, TriggerWindow{}).ok());
  }
  void TearDown() override {
    runtime::g_trigger_test_hook.store(nullptr);
    g_pause_at = TriggerHookPoint::kSlowPairFound;
    if (frozen()) (void)resume();
    (void)disarm_trigger();
    sem_destroy(&g_paused);
    sem_destroy(&g_go);
  }
  // A thread whose slow pair (req) stops before taking the token.
  static std::thread paused_writer(uint64_t req) {
    g_pause_next = true;
    std::thread writer([req] { slow_pair(req); });
    while (sem_wait(&g_paused) != 0) {
    }
    return writer;
  }
  // Whether the rings froze within `seconds`.
  static bool frozen_within(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!frozen() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return frozen();
  }
};

// Another slow pair fires and freezes meanwhile, and the rings are resumed.
TEST_F(DurationRaceTest, SlowPairOfAFrozenAndResumedRoundDoesNotFireTheNext) {
  std::thread writer = paused_writer(1);
  slow_pair(2);  // fires: the window is 0 events, so the rings freeze at once
  ASSERT_TRUE(frozen());
  const TriggerInfo fired = trigger_facts();
  ASSERT_EQ(fired.state, abi::TriggerState::kFrozen);
  ASSERT_TRUE(resume().ok());
  sem_post(&g_go);  // the paused writer goes on, in the next round
  writer.join();
  EXPECT_FALSE(frozen()) << "a slow pair of the last round fired this one";
  EXPECT_EQ(trigger_facts().state, abi::TriggerState::kArmed);
  slow_pair(3);  // the new round still fires, on its own pair
  EXPECT_TRUE(frozen());
  EXPECT_GT(trigger_facts().ticks, fired.ticks);
}

// The trigger is armed again while the writer is paused (a new round, nothing fired).
TEST_F(DurationRaceTest, SlowPairSeenBeforeARearmDoesNotFireTheNewRound) {
  std::thread writer = paused_writer(4);
  ASSERT_TRUE(arm_trigger(kTrigger, TriggerWindow{}).ok());
  sem_post(&g_go);
  writer.join();
  EXPECT_FALSE(frozen()) << "a slow pair seen before the re-arm fired the new round";
  slow_pair(5);
  EXPECT_TRUE(frozen());
}

// A stuck trigger: a writer paused in its begin while the round fires on another operation,
// freezes and is resumed opens its operation in the emptied table of the next round. It
// belongs to the round that froze (its end may have been dropped while frozen): it must
// never fire the next round as stuck, which still fires on its own stuck operation.
TEST_F(DurationRaceTest, BeginOfAFrozenAndResumedRoundIsNeverStuckInTheNext) {
  ASSERT_TRUE(arm_trigger("race:begin..race:end by req open > 20ms", TriggerWindow{}).ok());
  g_pause_at = TriggerHookPoint::kDurationBegin;
  g_pause_next = true;
  std::thread writer([] { emit_begin(10); });  // never ends
  while (sem_wait(&g_paused) != 0) {
  }
  emit_begin(11);  // never ends: stuck after 20 ms, and the rings freeze at once
  ASSERT_TRUE(frozen_within(10));
  ASSERT_TRUE(resume().ok());
  sem_post(&g_go);
  writer.join();  // its begin of req 10 is in the table now
  // Ten thresholds: the control thread ages the table every 20 ms.
  EXPECT_FALSE(frozen_within(0.2)) << "an operation of the frozen round fired the next as stuck";
  emit_begin(12);
  ASSERT_TRUE(frozen_within(10));
  const TriggerInfo facts = trigger_facts();
  EXPECT_EQ(facts.duration.kind, 2u);
  EXPECT_EQ(facts.duration.key, 12u);
  EXPECT_EQ(facts.duration.begin_tid, static_cast<uint32_t>(syscall(SYS_gettid)));
}

}  // namespace
}  // namespace nanotrace
