// Controller against a live traced process (the test producer): groups, and the trigger's
// whole life (arm, refusal of a bad expression, disarm, a fired and frozen trigger, resume),
// read back as TriggerInfo rather than header bytes.
#include "nanotrace/controller.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

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

// A trigger that matches at once fires (and freezes) before a controller can see it armed:
// arm() must still answer, since the process acknowledged the request.
TEST(ControllerTest, ArmAnswersWhenTheTriggerFiresAtOnce) {
  // One writing thread: each round's firing then happens on the thread that fired before.
  testing::ChildProcess child({kProducer, "--threads", "1", "--forever"}, {});
  pid_t pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
  Result<std::unique_ptr<Controller>> control = Status::NotFound("not attached yet");
  for (int i = 0; i < 500 && !control.ok(); ++i) {
    control = Controller::attach(std::to_string(pid));
    if (!control.ok()) usleep(10000);
  }
  ASSERT_TRUE(control.ok()) << control.status().message();
  Controller& c = **control;
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
