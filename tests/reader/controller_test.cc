// Controller against a live traced process (the test producer): groups, and the trigger's
// whole life (arm, refusal of a bad expression, disarm, a fired and frozen trigger, resume),
// read back as TriggerInfo rather than header bytes.
#include "nanotrace/controller.hpp"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"

namespace nanotrace {
namespace {

const std::string kProducer = std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer";

pid_t start(testing::ChildProcess& child) {
  pid_t pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
  EXPECT_EQ(child.read_line(), "ready");
  return pid;
}

TEST(ControllerTest, ArmsRefusesAndDisarmsATrigger) {
  testing::ChildProcess child({kProducer, "--events", "100", "--hold"}, {});
  pid_t pid = start(child);
  auto control = Controller::attach(std::to_string(pid));
  ASSERT_TRUE(control.ok()) << control.status().message();
  Controller& c = **control;
  EXPECT_EQ(c.process().pid, static_cast<uint32_t>(pid));
  EXPECT_EQ(c.process().trigger.state, abi::TriggerState::kNone);

  ASSERT_TRUE(c.arm("test:rec value>=5", {.after_events = 7}).ok());
  auto t = c.trigger();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state, abi::TriggerState::kArmed);
  EXPECT_EQ(t->expression, "test:rec value>=5");
  EXPECT_EQ(t->after_events, 7u);

  // The process refuses what it cannot bind, and says why; the armed trigger stays.
  Status bad = c.arm("test:rec nosuchfield>1");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("nosuchfield"), std::string::npos) << bad.message();
  Status unknown = c.arm("test:nosuch");
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);

  // Not fired: nothing to resume.
  EXPECT_EQ(c.resume().code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(c.disarm().ok());
  t = c.trigger();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state, abi::TriggerState::kNone);
  child.close_stdin();
  child.wait();
}

TEST(ControllerTest, ReportsAFrozenTriggerAndResumesIt) {
  testing::ChildProcess child({kProducer, "--events", "1000", "--hold"},
                              {"NANOTRACE_TRIGGER=test:rec seq==50", "NANOTRACE_TRIGGER_AFTER=10"});
  pid_t pid = start(child);
  auto control = Controller::attach("name:nosuch-process-name");
  EXPECT_FALSE(control.ok());
  control = Controller::attach(std::to_string(pid));
  ASSERT_TRUE(control.ok()) << control.status().message();
  Controller& c = **control;
  auto t = c.trigger();
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->state, abi::TriggerState::kFrozen);
  EXPECT_EQ(t->seq, 50u);
  EXPECT_GT(t->tid, 0u);
  const EventInfo* e = c.trace().event_by_id(t->event);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->full_name(), "test:rec");
  EXPECT_GE(t->frozen_ticks, t->ticks);

  ASSERT_TRUE(c.resume().ok());
  t = c.trigger();
  ASSERT_TRUE(t.ok());
  EXPECT_NE(t->state, abi::TriggerState::kFrozen);
  child.close_stdin();
  child.wait();
}

// A producer writing until its stdin closes (--forever), and a controller attached to it
// (its segment appears a moment after it prints its pid); error says why not.
struct ForeverProducer {
  explicit ForeverProducer(int threads)
      : child({kProducer, "--threads", std::to_string(threads), "--forever"}, {}) {
    const std::string pid = std::to_string(std::stol(child.read_line().substr(4)));
    Result<std::unique_ptr<Controller>> attached = Status::NotFound("not attached yet");
    for (int i = 0; i < 500 && !attached.ok(); ++i) {
      attached = Controller::attach(pid);
      if (!attached.ok()) usleep(10000);
    }
    if (attached.ok()) {
      control = std::move(*attached);
    } else {
      error = attached.status().message();
    }
  }
  ~ForeverProducer() {
    child.close_stdin();
    child.wait();
  }
  testing::ChildProcess child;
  std::unique_ptr<Controller> control;
  std::string error;
};

// A trigger that matches at once fires (and freezes) before a controller can see it armed:
// arm() must still answer, since the process acknowledged the request.
TEST(ControllerTest, ArmAnswersWhenTheTriggerFiresAtOnce) {
  // One writing thread: each round's firing then happens on the thread that fired before.
  ForeverProducer producer(1);
  ASSERT_NE(producer.control, nullptr) << producer.error;
  Controller& c = *producer.control;
  for (int round = 0; round < 10; ++round) {
    Status armed = c.arm("test:rec value>=0", {.after_events = 10});
    ASSERT_TRUE(armed.ok()) << "round " << round << ": " << armed.message();
    abi::TriggerState state = abi::TriggerState::kArmed;
    for (int i = 0; i < 1000 && state != abi::TriggerState::kFrozen; ++i) {
      auto t = c.trigger();
      ASSERT_TRUE(t.ok());
      state = t->state;
      if (state != abi::TriggerState::kFrozen) usleep(2000);
    }
    EXPECT_EQ(state, abi::TriggerState::kFrozen) << "round " << round;
    ASSERT_TRUE(c.disarm().ok()) << "round " << round;
  }
}

uint64_t written(Controller& c) {
  uint64_t n = 0;
  for (const ThreadInfo& t : c.trace().threads()) n += t.written;
  return n;
}

// A freeze on request (a fleet agent's): the rings stop within one record per thread, whatever
// the trigger's state; resume() gives back the trigger that was armed; a fired trigger's
// window ends at the freeze and keeps its facts.
TEST(ControllerTest, FreezesOnRequestAndResumes) {
  ForeverProducer producer(3);
  ASSERT_NE(producer.control, nullptr) << producer.error;
  Controller& c = *producer.control;
  while (written(c) < 3000) usleep(1000);

  // Nothing armed.
  ASSERT_TRUE(c.freeze().ok());
  EXPECT_EQ(c.trigger_state(), abi::TriggerState::kFrozen);
  auto t = c.trigger();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->event, 0u);  // no matching record: frozen on request
  EXPECT_NE(t->frozen_ticks, 0u);
  // At most the record each thread had reserved (a descheduled writer publishes it later).
  uint64_t at_freeze = written(c);
  for (int i = 0; i < 4; ++i) {
    usleep(10000);
    EXPECT_LE(written(c), at_freeze + 3);
  }
  uint64_t frozen = written(c);
  ASSERT_TRUE(c.resume().ok());
  EXPECT_EQ(c.trigger_state(), abi::TriggerState::kNone);
  while (written(c) < frozen + 1000) usleep(1000);

  // Armed on a record that never comes: frozen, then armed again by resume.
  ASSERT_TRUE(c.arm("test:rec value>=1000000000000").ok());
  ASSERT_TRUE(c.freeze().ok());
  EXPECT_EQ(c.trigger_state(), abi::TriggerState::kFrozen);
  ASSERT_TRUE(c.resume().ok());
  EXPECT_EQ(c.trigger_state(), abi::TriggerState::kArmed);

  // Fired, its window running (a billion events): the freeze ends it, the facts stay.
  ASSERT_TRUE(c.arm("test:rec value>=0", {.after_events = 1000000000}).ok());
  for (int i = 0; i < 1000 && c.trigger_state() != abi::TriggerState::kFired; ++i) usleep(1000);
  ASSERT_EQ(c.trigger_state(), abi::TriggerState::kFired);
  ASSERT_TRUE(c.freeze().ok());
  t = c.trigger();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state, abi::TriggerState::kFrozen);
  EXPECT_NE(t->event, 0u);
  EXPECT_GE(t->frozen_ticks, t->ticks);
}

// Re-arming while every writer tests the armed expression: a writer that matched the old
// one must not fire the new round, and the new round fires once. (Both went wrong: a firing
// begun before the re-arm was clobbered by it, a second one fired beside the first, and
// the segment showed "fired" after a freeze, or the freeze found the firing stuck.)
TEST(ControllerTest, ReArmingWhileThreadsTestTheTriggerFiresEachRoundOnce) {
  ForeverProducer producer(3);
  ASSERT_NE(producer.control, nullptr) << producer.error;
  Controller& c = *producer.control;
  while (written(c) < 3000) usleep(1000);
  for (int round = 0; round < 30; ++round) {
    // Armed and tested by every record, never matching; then one that matches at once.
    ASSERT_TRUE(c.arm("test:rec value>=1000000000000").ok()) << "round " << round;
    usleep(2000);
    ASSERT_TRUE(c.arm("test:rec value>=0", {.after_events = 1000000000}).ok()) << "round " << round;
    for (int i = 0; i < 1000 && c.trigger_state() != abi::TriggerState::kFired; ++i) usleep(1000);
    ASSERT_EQ(c.trigger_state(), abi::TriggerState::kFired) << "round " << round;
    ASSERT_TRUE(c.freeze().ok()) << "round " << round;
    auto t = c.trigger();
    ASSERT_TRUE(t.ok());
    ASSERT_EQ(t->state, abi::TriggerState::kFrozen) << "round " << round;
    EXPECT_NE(t->event, 0u);
    EXPECT_GE(t->frozen_ticks, t->ticks) << "round " << round;
    if (round % 2 == 0) {
      ASSERT_TRUE(c.resume().ok());
    } else {
      ASSERT_TRUE(c.disarm().ok());
    }
  }
}

// Two controllers of one process (an agent and an operator's CLI) asking at once: each gets
// its own answer. (The segment holds one request: without turns, one overwrote the other's,
// which then waited 3 s for an answer that never came.)
TEST(ControllerTest, TwoControllersAskingAtOnceEachGetTheirAnswer) {
  testing::ChildProcess child({kProducer, "--events", "100", "--hold"}, {});
  pid_t pid = start(child);
  auto first = Controller::attach(std::to_string(pid));
  auto second = Controller::attach(std::to_string(pid));
  ASSERT_TRUE(first.ok() && second.ok());
  auto ask = [](Controller& c, std::string expression, std::vector<std::string>* errors) {
    for (int i = 0; i < 100; ++i) {
      Status s = c.arm(expression);
      if (!s.ok()) errors->push_back(s.message());
      // A freeze in two halves, as the agent does it.
      auto seq = c.post_freeze();
      s = seq.ok() ? c.await_answer(*seq) : seq.status();
      if (!s.ok()) errors->push_back(s.message());
    }
  };
  std::vector<std::string> errors_first, errors_second;
  std::thread other(ask, std::ref(**second), "test:rec value>=2000000000000", &errors_second);
  ask(**first, "test:rec value>=1000000000000", &errors_first);
  other.join();
  EXPECT_TRUE(errors_first.empty())
      << errors_first.size() << " errors, the first: " << errors_first.front();
  EXPECT_TRUE(errors_second.empty())
      << errors_second.size() << " errors, the first: " << errors_second.front();
  child.close_stdin();
  child.wait();
}

uint64_t process_clock_now(const Controller& c) {
  if (c.process().clock == abi::ClockKind::kTsc) {
    unsigned aux;
    return __rdtscp(&aux);
  }
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A freeze signalled without a request (a fleet agent's, from its broker's thread): a process
// that writes nothing is frozen by its control thread, as of the signal, not as of when that
// thread ran; resume() then takes the signal as answered.
TEST(ControllerTest, SignalledFreezeStampsTheRequestsTime) {
  testing::ChildProcess child({kProducer, "--events", "100", "--hold"}, {});
  pid_t pid = start(child);
  auto control = Controller::attach(std::to_string(pid));
  ASSERT_TRUE(control.ok()) << control.status().message();
  Controller& c = **control;
  for (int round = 0; round < 2; ++round) {
    const uint64_t before = process_clock_now(c);
    ASSERT_TRUE(c.signal_freeze().ok());
    const uint64_t after = process_clock_now(c);
    for (int i = 0; i < 3000 && c.trigger_state() != abi::TriggerState::kFrozen; ++i) {
      usleep(1000);
    }
    ASSERT_EQ(c.trigger_state(), abi::TriggerState::kFrozen) << "round " << round;
    auto t = c.trigger();
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->event, 0u);
    EXPECT_GE(t->frozen_ticks, before);
    EXPECT_LE(t->frozen_ticks, after);
    EXPECT_EQ(t->ticks, t->frozen_ticks);
    ASSERT_TRUE(c.resume().ok());
    EXPECT_EQ(c.trigger_state(), abi::TriggerState::kNone);
  }
  // A plain request after a signalled one is stamped when handled, not with the old stamp.
  const uint64_t before = process_clock_now(c);
  ASSERT_TRUE(c.freeze().ok());
  auto t = c.trigger();
  ASSERT_TRUE(t.ok());
  EXPECT_GE(t->frozen_ticks, before);
  child.close_stdin();
  child.wait();
}

TEST(ControllerTest, SwitchesGroupsAndRejectsUnknownOnes) {
  testing::ChildProcess child({kProducer, "--events", "10", "--hold"}, {});
  pid_t pid = start(child);
  auto control = Controller::attach(std::to_string(pid));
  ASSERT_TRUE(control.ok()) << control.status().message();
  Controller& c = **control;
  auto enabled = [&](const std::string& name) {
    for (const GroupInfo& g : c.groups()) {
      if (g.name == name) return g.enabled;
    }
    ADD_FAILURE() << "no group " << name;
    return false;
  };
  EXPECT_TRUE(enabled("test"));
  ASSERT_TRUE(c.set_group_enabled("test", false).ok());
  EXPECT_FALSE(enabled("test"));
  ASSERT_TRUE(c.set_group_enabled("test", true).ok());
  EXPECT_TRUE(enabled("test"));
  Status s = c.set_group_enabled("nosuch", false);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  child.close_stdin();
  child.wait();
  // Its process gone, the segment is no longer controllable.
  auto gone = Controller::attach(std::to_string(pid));
  EXPECT_FALSE(gone.ok());
}

}  // namespace
}  // namespace nanotrace
