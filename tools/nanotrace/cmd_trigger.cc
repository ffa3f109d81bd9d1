// `nanotrace arm`, `disarm`, `resume` and `status`: control a process's in-process trigger
// from outside, through the library's Controller (which waits for the process's answer, so
// errors such as an unknown event or a bad field reach the user).
#include <fmt/format.h>

#include <cstring>

#include "base/utf8.hpp"
#include "commands.hpp"
#include "nanotrace/controller.hpp"
#include "nanotrace/trigger.hpp"

namespace nanotrace::cli {

int cmd_arm(const std::string& source, const std::string& expression, const std::string& after) {
  RemoteTriggerWindow window;
  if (!after.empty() && !Trigger::parse_window(after, &window.after_events, &window.after_ns)) {
    return fail(Status::Invalid("bad --after '" + after + "' (a count, or e.g. 500us, 2ms)"));
  }
  auto control = Controller::attach(source);
  if (!control.ok()) return fail(control.status());
  Status s = (*control)->arm(expression, window);
  if (!s.ok()) return fail(s);
  fmt::print("armed {} in process {}\n", expression, (*control)->process().pid);
  return 0;
}

int cmd_disarm(const std::string& source) {
  auto control = Controller::attach(source);
  if (!control.ok()) return fail(control.status());
  Status s = (*control)->disarm();
  if (!s.ok()) return fail(s);
  fmt::print("disarmed process {}\n", (*control)->process().pid);
  return 0;
}

int cmd_resume(const std::string& source) {
  auto control = Controller::attach(source);
  if (!control.ok()) return fail(control.status());
  Status s = (*control)->resume();
  if (!s.ok()) return fail(s);
  fmt::print("resumed process {}\n", (*control)->process().pid);
  return 0;
}

int cmd_status(const std::string& source) {
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  Trace& t = **opened;
  const ProcessInfo& p = t.process();
  const char* state = p.state == abi::ProcessState::kCrashed  ? "crashed"
                      : p.state == abi::ProcessState::kExited ? "exited"
                      : p.alive                               ? "running"
                                                              : "gone (no clean exit)";
  fmt::print("process {} ({}): {}\n", p.pid,
             utf8::escape_text(p.user_name.empty() ? p.process_name : p.user_name), state);
  if (p.state == abi::ProcessState::kCrashed) {
    fmt::print("  crashed on signal {} ({}) in thread {}\n", p.crash_signal,
               strsignal(static_cast<int>(p.crash_signal)), p.crash_tid);
  }
  fmt::print("  mode {}, {} threads, consumer {}\n", mode_name(p.mode), t.threads().size(),
             p.consumer_pid ? std::to_string(p.consumer_pid) : std::string("none"));
  const TriggerInfo& trig = p.trigger;
  fmt::print("  trigger: {}{}{}\n", trigger_state_name(trig.state),
             trig.state == abi::TriggerState::kFired ? " (recording the post-trigger window)" : "",
             trig.expression.empty() ? "" : " on " + utf8::escape_text(trig.expression));
  if (trig.state == abi::TriggerState::kFired || trig.state == abi::TriggerState::kFrozen) {
    const EventInfo* e = t.event_by_id(trig.event);
    fmt::print("  matched {} record #{} of thread {} at {} ns\n",
               e ? utf8::escape_text(e->full_name()) : "?", trig.seq, trig.tid,
               t.ticks_to_ns(trig.ticks));
    if (trig.state == abi::TriggerState::kFrozen) {
      fmt::print("  frozen at {} ns ({} ns after the match)\n", t.ticks_to_ns(trig.frozen_ticks),
                 t.ticks_to_ns(trig.frozen_ticks) - t.ticks_to_ns(trig.ticks));
    }
  }
  print_duration_status(t, trig);
  return 0;
}

}  // namespace nanotrace::cli
