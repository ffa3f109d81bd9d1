// `nanotrace arm`, `disarm`, `resume` and `status`: control a process's in-process trigger
// from outside. A request is written into the segment and the process's control thread
// carries it out (parsing and binding the expression against its own call sites); we wait
// for its answer so errors (unknown event, bad field) reach the user.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "commands.hpp"
#include "common/process.hpp"
#include "common/utf8.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/trigger.hpp"

namespace nanotrace::cli {
namespace {

const char* trigger_state_name(uint32_t s) {
  switch (static_cast<abi::TriggerState>(s)) {
    case abi::TriggerState::kNone:
      return "none";
    case abi::TriggerState::kArmed:
      return "armed";
    case abi::TriggerState::kFired:
      return "fired (recording the post-trigger window)";
    case abi::TriggerState::kFrozen:
      return "frozen";
  }
  return "unknown";
}

std::string bounded(const char* p, size_t cap) { return std::string(p, ::strnlen(p, cap)); }

Result<std::unique_ptr<Trace>> open_live(const std::string& source) {
  auto trace = open_source(source, /*writable=*/true);
  if (!trace.ok()) return trace.status();
  if (!(*trace)->process().alive) {
    return Status::Invalid("process " + std::to_string((*trace)->process().pid) +
                           " is not running");
  }
  return trace;
}

// Sends a request and waits until the process handled it.
Status send(Trace& trace, const std::string& request, uint64_t after_events, uint64_t after_ns,
            bool (*done)(const abi::SegmentHeader&, const std::string&)) {
  auto* h = reinterpret_cast<abi::SegmentHeader*>(trace.writable_base());
  if (request.size() >= sizeof(h->trigger_request)) return Status::Invalid("expression too long");
  h->trigger_after_events = after_events;
  h->trigger_after_ns = after_ns;
  std::memset(h->trigger_request, 0, sizeof(h->trigger_request));
  std::memcpy(h->trigger_request, request.data(), request.size());
  uint32_t seq = __atomic_add_fetch(&h->trigger_request_seq, 1, __ATOMIC_ACQ_REL);
  __atomic_fetch_add(&h->control_seq, 1, __ATOMIC_RELEASE);
  sys::futex_wake_all(&h->control_seq);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < deadline) {
    if (__atomic_load_n(&h->trigger_error_seq, __ATOMIC_ACQUIRE) == seq) {
      return Status::Invalid(bounded(h->trigger_error, sizeof(h->trigger_error)));
    }
    if (done(*h, request)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return Status::IoError("process " + std::to_string(trace.process().pid) +
                         " did not answer (its control thread is not running)");
}

}  // namespace

int cmd_arm(const std::string& source, const std::string& expression, const std::string& after) {
  uint64_t events = 0, ns = 0;
  if (!after.empty() && !Trigger::parse_window(after, &events, &ns)) {
    return fail(Status::Invalid("bad --after '" + after + "' (a count, or e.g. 500us, 2ms)"));
  }
  auto trace = open_live(source);
  if (!trace.ok()) return fail(trace.status());
  Status s = send(**trace, "arm " + expression, events, ns,
                  [](const abi::SegmentHeader& h, const std::string& req) {
                    return h.trigger_state == static_cast<uint32_t>(abi::TriggerState::kArmed) &&
                           bounded(h.trigger_expr, sizeof(h.trigger_expr)) == req.substr(4);
                  });
  if (!s.ok()) return fail(s);
  fmt::print("armed {} in process {}\n", expression, (*trace)->process().pid);
  return 0;
}

int cmd_disarm(const std::string& source) {
  auto trace = open_live(source);
  if (!trace.ok()) return fail(trace.status());
  Status s = send(**trace, "disarm", 0, 0, [](const abi::SegmentHeader& h, const std::string&) {
    return h.trigger_state == static_cast<uint32_t>(abi::TriggerState::kNone);
  });
  if (!s.ok()) return fail(s);
  fmt::print("disarmed process {}\n", (*trace)->process().pid);
  return 0;
}

int cmd_resume(const std::string& source) {
  auto trace = open_live(source);
  if (!trace.ok()) return fail(trace.status());
  auto* h = reinterpret_cast<const abi::SegmentHeader*>((*trace)->base());
  uint32_t state = h->trigger_state;
  if (state != static_cast<uint32_t>(abi::TriggerState::kFrozen) &&
      state != static_cast<uint32_t>(abi::TriggerState::kFired)) {
    return fail(Status::Invalid("process " + std::to_string((*trace)->process().pid) +
                                " is not frozen by a trigger"));
  }
  Status s = send(**trace, "resume", h->trigger_after_events, h->trigger_after_ns,
                  [](const abi::SegmentHeader& hh, const std::string&) {
                    return hh.trigger_state != static_cast<uint32_t>(abi::TriggerState::kFrozen);
                  });
  if (!s.ok()) return fail(s);
  fmt::print("resumed process {}\n", (*trace)->process().pid);
  return 0;
}

int cmd_status(const std::string& source) {
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  Trace& t = **opened;
  const ProcessInfo& p = t.process();
  auto* h = reinterpret_cast<const abi::SegmentHeader*>(t.base());
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
  uint32_t ts = h->trigger_state;
  std::string expr = bounded(h->trigger_expr, sizeof(h->trigger_expr));
  fmt::print("  trigger: {}{}\n", trigger_state_name(ts),
             expr.empty() ? "" : " on " + utf8::escape_text(expr));
  if (ts == static_cast<uint32_t>(abi::TriggerState::kFired) ||
      ts == static_cast<uint32_t>(abi::TriggerState::kFrozen)) {
    const EventInfo* e = t.event_by_id(static_cast<uint16_t>(h->trigger_event));
    fmt::print("  matched {} record #{} of thread {} at {} ns\n",
               e ? utf8::escape_text(e->full_name()) : "?", h->trigger_seq, h->trigger_tid,
               t.ticks_to_ns(h->trigger_ticks));
    if (ts == static_cast<uint32_t>(abi::TriggerState::kFrozen)) {
      fmt::print("  frozen at {} ns ({} ns after the match)\n", t.ticks_to_ns(h->frozen_ticks),
                 t.ticks_to_ns(h->frozen_ticks) - t.ticks_to_ns(h->trigger_ticks));
    }
  }
  return 0;
}

}  // namespace nanotrace::cli
