// Arming, the control side of in-process triggers (under the runtime's lock): an expression
// bound to the call sites it names (their enable byte 2), and arm, disarm and resume, each a
// new round of the firing protocol (trigger_runtime.cc) begun once its token is taken; the
// requests a controller writes into the segment; and the API of nanotrace/control.hpp.
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "nanotrace/control.hpp"
#include "runtime/duration_runtime.hpp"
#include "runtime/runtime.hpp"
#include "runtime/trigger_state.hpp"

namespace nanotrace::runtime {
namespace {

using abi::TriggerState;

// REQUIRES: mu held. Every site's enable byte from its group and the trigger phase.
void reapply(Runtime& rt) { rt.apply_groups_locked(); }

// A duration trigger just armed (or resumed) is aged from now: the control thread, asleep
// for up to its 100 ms period, is woken to set its first deadline. Without it the first stuck
// operation after an arm was named up to 80 ms past a 20 ms threshold (duration_bench).
void wake_for_aging(Runtime& rt) {
  if (rt.armed != nullptr && rt.armed->duration != nullptr) rt.wake_control_thread();
}

}  // namespace

uint8_t Runtime::site_state_locked(const detail::Site* site, bool group_enabled) const {
  auto phase = static_cast<TriggerState>(current_phase());
  if (!group_enabled || site->id == 0) return 0;
  if (phase != TriggerState::kNone && armed && armed->fields.count(site)) return 2;
  return 1;
}

Result<const Runtime::ArmedTrigger*> Runtime::bind_trigger_locked(const std::string& expression,
                                                                  uint64_t after_events,
                                                                  uint64_t after_ns) {
  auto parsed = Trigger::parse(expression);
  if (!parsed.ok()) return parsed.status();
  if (parsed->duration) {
    return bind_duration_trigger_locked(*this, std::move(*parsed), after_events, after_ns);
  }
  std::unordered_map<const detail::Site*, std::vector<uint32_t>> fields;
  Status last_error = Status::NotFound("no event " + parsed->group + ":" + parsed->event);
  for (const detail::Site* site : sites) {
    if (site->is_guard || parsed->group != site->group || parsed->event != site->name) continue;
    std::vector<std::string> names;
    std::vector<abi::FieldType> types;
    auto* e = reinterpret_cast<abi::EventEntry*>(segment.base + segment.header()->events_offset) +
              (site->id - 1);
    const char* pool =
        reinterpret_cast<const char*>(segment.base + segment.header()->strings_offset);
    for (uint32_t f = 0; f < site->field_count; ++f) {
      names.emplace_back(pool + e->field_names[f]);
      types.push_back(site->types[f]);
    }
    auto bound = parsed->bind(names, types);
    if (!bound.ok()) {
      last_error = bound.status();
      continue;
    }
    fields[site] = bound.value();
  }
  if (fields.empty()) return last_error;
  return new ArmedTrigger{std::move(parsed.value()), std::move(fields), after_events, after_ns};
}

// A trigger a writer may still be testing is retired, never freed.
void Runtime::replace_armed_locked(const ArmedTrigger* next) {
  if (armed != nullptr) retire_duration_locked(*armed, next);
  if (armed != nullptr) retired_triggers.push_back(armed);
  armed = next;
  g_armed.store(armed, std::memory_order_release);
}

Status Runtime::arm_locked(const std::string& expression, uint64_t after_events,
                           uint64_t after_ns) {
  if (!started) return Status::NotFound("tracing is not running");
  auto bound = bind_trigger_locked(expression, after_events, after_ns);
  if (!bound.ok()) return bound.status();
  if (take_token(*this) == Token::kStuck) {
    delete *bound;
    return stuck_firing();
  }
  replace_armed_locked(*bound);
  abi::SegmentHeader* h = segment.header();
  std::memset(h->trigger_expr, 0, sizeof(h->trigger_expr));
  std::strncpy(h->trigger_expr, armed->expression.text.c_str(), sizeof(h->trigger_expr) - 1);
  h->trigger_after_events = after_events;
  h->trigger_after_ns = after_ns;
  std::memset(&h->duration, 0, sizeof(h->duration));  // a duration trigger's facts and counts
  start_round(h, TriggerState::kArmed);
  reapply(*this);
  wake_for_aging(*this);
  return Status::Ok();
}

void Runtime::rebind_trigger_locked() {
  if (!started || armed == nullptr) return;
  auto bound = bind_trigger_locked(armed->expression.text, armed->after_events, armed->after_ns);
  if (!bound.ok()) return;  // it bound before; the new module's sites cannot unbind it
  adopt_duration_state_locked(*armed, **bound);
  replace_armed_locked(*bound);
  reapply(*this);
}

void Runtime::arm_from_environment_locked() {
  if (config.trigger.empty() || armed != nullptr) return;
  Status s = arm_locked(config.trigger, config.trigger_after_events, config.trigger_after_ns);
  // Said once, and only once some module's tracepoints were there to look in: the runtime
  // may start from a library without tracepoints of its own, before the program's register.
  if (s.ok() || sites.empty() || environment_trigger_warned) return;
  environment_trigger_warned = true;
  std::fprintf(stderr, "nanotrace: NANOTRACE_TRIGGER: %s%s\n", s.message().c_str(),
               s.code() == StatusCode::kNotFound ? " (armed if a module loaded later has it)" : "");
}

Status Runtime::disarm_locked() {
  if (!started) {
    replace_armed_locked(nullptr);
    g_state.store(with_phase(g_state.load(std::memory_order_relaxed), kNonePhase),
                  std::memory_order_release);
    return Status::Ok();
  }
  if (take_token(*this) == Token::kStuck) return stuck_firing();
  replace_armed_locked(nullptr);
  abi::SegmentHeader* h = segment.header();
  std::memset(h->trigger_expr, 0, sizeof(h->trigger_expr));
  start_round(h, TriggerState::kNone);
  reapply(*this);
  return Status::Ok();
}

Status Runtime::resume_locked() {
  auto phase = static_cast<TriggerState>(current_phase());
  if (phase != TriggerState::kFrozen && phase != TriggerState::kFired) {
    return Status::Invalid("the trigger has not fired");
  }
  // The firing holds the token; it is taken for the new round only once complete.
  if (take_token(*this) == Token::kStuck) return stuck_firing();
  // Unfreeze, keeping the same trigger armed for the next occurrence; the freeze requests
  // made so far are answered.
  g_freeze_seen.store(__atomic_load_n(&segment.header()->freeze_seq, __ATOMIC_ACQUIRE),
                      std::memory_order_relaxed);
  if (armed != nullptr) restart_duration_locked(*this, *armed);
  start_round(segment.header(), armed ? TriggerState::kArmed : TriggerState::kNone);
  reapply(*this);
  wake_for_aging(*this);
  return Status::Ok();
}

void Runtime::process_trigger_request_locked() {
  abi::SegmentHeader* h = segment.header();
  uint32_t seq = __atomic_load_n(&h->trigger_request_seq, __ATOMIC_ACQUIRE);
  if (seq == trigger_requests_seen) return;
  trigger_requests_seen = seq;
  char request[sizeof(h->trigger_request) + 1] = {};
  std::memcpy(request, h->trigger_request, sizeof(h->trigger_request));
  std::string text = request;
  Status s;
  if (text.rfind("arm ", 0) == 0) {
    s = arm_locked(text.substr(4), h->trigger_after_events, h->trigger_after_ns);
  } else if (text == "disarm") {
    s = disarm_locked();
  } else if (text == "resume") {
    s = resume_locked();
  } else if (text == "freeze") {
    s = freeze_locked();
  } else {
    s = Status::Invalid("unknown request '" + text + "'");
  }
  if (!s.ok()) {
    std::memset(h->trigger_error, 0, sizeof(h->trigger_error));
    std::strncpy(h->trigger_error, s.message().c_str(), sizeof(h->trigger_error) - 1);
    __atomic_store_n(&h->trigger_error_seq, seq, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&h->trigger_done_seq, seq, __ATOMIC_RELEASE);
}

}  // namespace nanotrace::runtime

namespace nanotrace {

Status arm_trigger(std::string_view expression, const TriggerWindow& window) {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  return rt.arm_locked(std::string(expression), window.after_events, window.after_ns);
}

Status disarm_trigger() {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  return rt.disarm_locked();
}

Status resume() {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  return rt.resume_locked();
}

bool frozen() { return runtime::current_phase() == runtime::kFrozenPhase; }

}  // namespace nanotrace
