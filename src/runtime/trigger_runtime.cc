// In-process triggers: freeze the flight recorder exactly at the event that matters.
//
// Arming marks the matching call sites' enable byte 2, so the hot path calls
// special_event() for them alone (other sites pay nothing). When a record of an armed site
// satisfies the expression, the trigger fires: the segment notes which record matched, every
// enabled site switches to 2, and each further record is let through only while the
// post-trigger window lasts (an atomic count of events, or a clock deadline). The first
// record past the window is not published, all sites are switched off and the segment is
// marked frozen, so the rings keep the evidence until someone collects it.
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "nanotrace/control.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

using abi::TriggerState;

std::atomic<uint32_t> g_phase{static_cast<uint32_t>(TriggerState::kNone)};
std::atomic<int64_t> g_remaining{0};
std::atomic<uint64_t> g_deadline{0};  // clock value; 0 = count events
std::atomic<const Runtime::ArmedTrigger*> g_armed{nullptr};
std::atomic<bool> g_firing{false};  // the first matching thread takes it; reset on arm

void set_state(abi::SegmentHeader* h, TriggerState s) {
  __atomic_store_n(&h->trigger_state, static_cast<uint32_t>(s), __ATOMIC_RELEASE);
}

// REQUIRES: mu held. Every site's enable byte from its group and the trigger phase.
void reapply(Runtime& rt) { rt.apply_groups_locked(); }

void freeze(Runtime& rt) {
  std::lock_guard lock(rt.mu);
  abi::SegmentHeader* h = rt.segment.header();
  h->frozen_ticks = detail::now_ticks();
  set_state(h, TriggerState::kFrozen);
  reapply(rt);
}

void fire(Runtime& rt, const Runtime::ArmedTrigger& armed, const detail::Site& site,
          uint64_t ticks) {
  std::lock_guard lock(rt.mu);
  // Switch every site to the watched state first: until then other threads publish
  // records the window does not count.
  bool freeze_now = armed.after_events == 0 && armed.after_ns == 0;
  auto next = freeze_now ? TriggerState::kFrozen : TriggerState::kFired;
  g_phase.store(static_cast<uint32_t>(next), std::memory_order_release);
  reapply(rt);
  abi::SegmentHeader* h = rt.segment.header();
  detail::Writer& w = detail::t_writer;
  h->trigger_event = site.id;
  h->trigger_ticks = ticks;
  h->trigger_tid = w.slot->tid;
  h->trigger_slot = static_cast<uint32_t>(
      (reinterpret_cast<uint8_t*>(w.slot) - (rt.segment.base + h->threads_offset)) /
      sizeof(abi::ThreadSlot));
  h->trigger_seq = w.slot->written;  // the matching record's number (published next)
  if (freeze_now) h->frozen_ticks = ticks;
  set_state(h, next);
}

}  // namespace

uint8_t Runtime::site_state_locked(const detail::Site* site, bool group_enabled) const {
  auto phase = static_cast<TriggerState>(g_phase.load(std::memory_order_acquire));
  if (!group_enabled || site->id == 0 || phase == TriggerState::kFrozen) return 0;
  if (phase == TriggerState::kFired) return 2;
  if (phase == TriggerState::kArmed && armed && armed->fields.count(site)) return 2;
  return 1;
}

Status Runtime::arm_locked(const std::string& expression, uint64_t after_events,
                           uint64_t after_ns) {
  if (!started) return Status::NotFound("tracing is not running");
  auto parsed = Trigger::parse(expression);
  if (!parsed.ok()) return parsed.status();
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
  abi::SegmentHeader* h = segment.header();
  armed = new ArmedTrigger{std::move(parsed.value()), std::move(fields), after_events, after_ns};
  g_armed.store(armed, std::memory_order_release);
  std::memset(h->trigger_expr, 0, sizeof(h->trigger_expr));
  std::strncpy(h->trigger_expr, armed->expression.text.c_str(), sizeof(h->trigger_expr) - 1);
  h->trigger_after_events = after_events;
  h->trigger_after_ns = after_ns;
  g_firing.store(false, std::memory_order_release);
  g_phase.store(static_cast<uint32_t>(TriggerState::kArmed), std::memory_order_release);
  set_state(h, TriggerState::kArmed);
  reapply(*this);
  return Status::Ok();
}

void Runtime::disarm_locked() {
  armed = nullptr;
  g_armed.store(nullptr, std::memory_order_release);
  g_phase.store(static_cast<uint32_t>(TriggerState::kNone), std::memory_order_release);
  if (!started) return;
  abi::SegmentHeader* h = segment.header();
  std::memset(h->trigger_expr, 0, sizeof(h->trigger_expr));
  set_state(h, TriggerState::kNone);
  reapply(*this);
}

Status Runtime::resume_locked() {
  auto phase = static_cast<TriggerState>(g_phase.load(std::memory_order_acquire));
  if (phase != TriggerState::kFrozen && phase != TriggerState::kFired) {
    return Status::Invalid("the trigger has not fired");
  }
  // Unfreeze, keeping the same trigger armed for the next occurrence.
  auto next = armed ? TriggerState::kArmed : TriggerState::kNone;
  g_firing.store(false, std::memory_order_release);
  g_phase.store(static_cast<uint32_t>(next), std::memory_order_release);
  set_state(segment.header(), next);
  reapply(*this);
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
    disarm_locked();
  } else if (text == "resume") {
    s = resume_locked();
  } else {
    s = Status::Invalid("unknown request '" + text + "'");
  }
  if (!s.ok()) {
    std::memset(h->trigger_error, 0, sizeof(h->trigger_error));
    std::strncpy(h->trigger_error, s.message().c_str(), sizeof(h->trigger_error) - 1);
    __atomic_store_n(&h->trigger_error_seq, seq, __ATOMIC_RELEASE);
  }
}

}  // namespace nanotrace::runtime

namespace nanotrace::detail {

// In the post-trigger window: true while the window lasts; the first record past it
// freezes the rings and is not published.
bool phase_allows(const Site&, const uint64_t*) noexcept {
  using runtime::Runtime;
  auto phase = static_cast<abi::TriggerState>(runtime::g_phase.load(std::memory_order_acquire));
  if (phase == abi::TriggerState::kFrozen) return false;
  if (phase != abi::TriggerState::kFired) return true;
  uint64_t deadline = runtime::g_deadline.load(std::memory_order_relaxed);
  bool inside = deadline != 0 ? now_ticks() <= deadline
                              : runtime::g_remaining.fetch_sub(1, std::memory_order_acq_rel) > 0;
  if (inside) return true;
  uint32_t expected = static_cast<uint32_t>(abi::TriggerState::kFired);
  if (runtime::g_phase.compare_exchange_strong(expected,
                                               static_cast<uint32_t>(abi::TriggerState::kFrozen))) {
    runtime::freeze(Runtime::instance());
  }
  return false;
}

bool special_event(const Site& site, const uint64_t* record) noexcept {
  using runtime::Runtime;
  auto phase = static_cast<abi::TriggerState>(runtime::g_phase.load(std::memory_order_acquire));
  Runtime& rt = Runtime::instance();
  if (phase == abi::TriggerState::kArmed) {
    // Decode the record just written (it is not published yet) and test the expression.
    FieldValue values[abi::kMaxFields];
    const auto* bytes = reinterpret_cast<const uint8_t*>(record + 1);
    for (uint32_t f = 0; f < site.field_count; ++f) {
      values[f].type = site.types[f];
      if (site.types[f] == abi::FieldType::kString) {
        uint32_t n = bytes[0];
        values[f].text = std::string_view(reinterpret_cast<const char*>(bytes + 1), n);
        bytes += abi::string_slot_bytes(n);
      } else {
        std::memcpy(&values[f].bits, bytes, 8);
        bytes += 8;
      }
    }
    const Runtime::ArmedTrigger* armed = runtime::g_armed.load(std::memory_order_acquire);
    if (armed == nullptr) return true;
    auto it = armed->fields.find(&site);
    if (it == armed->fields.end() || !armed->expression.matches(it->second, values)) return true;
    // One thread wins the race to fire; it sets the window before anyone can count in it.
    if (runtime::g_firing.exchange(true, std::memory_order_acq_rel)) {
      return phase_allows(site, record);
    }
    uint64_t ticks = abi::expand_ticks(now_ticks(), record[0] >> 16);
    runtime::g_remaining.store(static_cast<int64_t>(armed->after_events));
    uint64_t hz = rt.segment.header()->ticks_per_second;
    runtime::g_deadline.store(
        armed->after_ns ? ticks + static_cast<uint64_t>(static_cast<double>(armed->after_ns) *
                                                        static_cast<double>(hz) / 1e9)
                        : 0);
    runtime::fire(rt, *armed, site, ticks);
    return true;  // the matching record itself is kept
  }
  return phase_allows(site, record);
}

}  // namespace nanotrace::detail

namespace nanotrace {

Status arm_trigger(std::string_view expression, const TriggerWindow& window) {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  return rt.arm_locked(std::string(expression), window.after_events, window.after_ns);
}

Status disarm_trigger() {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  rt.disarm_locked();
  return Status::Ok();
}

Status resume() {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  return rt.resume_locked();
}

bool frozen() {
  return runtime::g_phase.load(std::memory_order_acquire) ==
         static_cast<uint32_t>(abi::TriggerState::kFrozen);
}

}  // namespace nanotrace
