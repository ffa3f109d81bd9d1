// Controller: the requesting side of the control protocol (groups through their enable
// bytes, the trigger through trigger_request). The process's control thread is the other
// side (src/runtime/control_thread.cc, trigger_runtime.cc).
#include "nanotrace/controller.hpp"

#include <sys/file.h>
#include <x86intrin.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/clock.hpp"
#include "base/process.hpp"
#include "reader/trace_internals.hpp"

namespace nanotrace {
namespace reader {

// The writer publishes the trigger's facts with atomic stores, the state last (a release):
// read the state first, then the facts, each with one load.
template <typename T>
T load_fact(const T& fact) {
  return __atomic_load_n(&fact, __ATOMIC_RELAXED);
}

// A duration trigger's facts, one load per field (the process stores each so).
void load_duration_facts(const abi::DurationFacts& f, abi::DurationFacts* t) {
  t->kind = load_fact(f.kind);
  t->begin_event = load_fact(f.begin_event);
  t->begin_tid = load_fact(f.begin_tid);
  t->begin_slot = load_fact(f.begin_slot);
  t->begin_seq = load_fact(f.begin_seq);
  t->begin_ticks = load_fact(f.begin_ticks);
  t->duration_ticks = load_fact(f.duration_ticks);
  t->threshold_ticks = load_fact(f.threshold_ticks);
  t->key = load_fact(f.key);
  t->key_hashed = load_fact(f.key_hashed);
  t->stuck_count = load_fact(f.stuck_count);
  t->pairs = load_fact(f.pairs);
  t->unmatched_ends = load_fact(f.unmatched_ends);
  t->replaced = load_fact(f.replaced);
  t->evicted = load_fact(f.evicted);
  t->unseen = load_fact(f.unseen);
  t->held_back = load_fact(f.held_back);
  t->fires = load_fact(f.fires);
  t->open = load_fact(f.open);
  t->oldest_open_ticks = load_fact(f.oldest_open_ticks);
  t->current_threshold_ticks = load_fact(f.current_threshold_ticks);
  t->window_pairs = load_fact(f.window_pairs);
  t->capacity = load_fact(f.capacity);
}

TriggerInfo trigger_info(const abi::SegmentHeader& h) {
  TriggerInfo t;
  const uint32_t state = __atomic_load_n(&h.trigger_state, __ATOMIC_ACQUIRE);
  t.state = state <= static_cast<uint32_t>(abi::TriggerState::kFrozen)
                ? static_cast<abi::TriggerState>(state)
                : abi::TriggerState::kNone;
  t.expression.assign(h.trigger_expr, ::strnlen(h.trigger_expr, sizeof(h.trigger_expr)));
  t.after_events = load_fact(h.trigger_after_events);
  t.after_ns = load_fact(h.trigger_after_ns);
  if (t.state == abi::TriggerState::kFired || t.state == abi::TriggerState::kFrozen) {
    const uint32_t event = load_fact(h.trigger_event);
    t.event = event <= UINT16_MAX ? static_cast<uint16_t>(event) : 0;
    t.ticks = load_fact(h.trigger_ticks);
    t.seq = load_fact(h.trigger_seq);
    t.tid = load_fact(h.trigger_tid);
    t.slot = load_fact(h.trigger_slot);
  }
  if (t.state == abi::TriggerState::kFrozen) t.frozen_ticks = load_fact(h.frozen_ticks);
  load_duration_facts(h.duration, &t.duration);
  if (t.state != abi::TriggerState::kFired && t.state != abi::TriggerState::kFrozen) {
    t.duration.kind = 0;  // the facts of a firing before a resume
  }
  return t;
}

}  // namespace reader

Result<std::unique_ptr<Controller>> Controller::attach(const std::string& source) {
  auto trace = Trace::open(source, /*writable=*/true);
  if (!trace.ok()) return trace.status();
  if ((*trace)->is_file()) {
    return Status::Invalid(source + " is a trace file, not a live process");
  }
  if (!(*trace)->process().alive) {
    return Status::Invalid("process " + std::to_string((*trace)->process().pid) +
                           " is not running");
  }
  return std::unique_ptr<Controller>(new Controller(std::move(*trace)));
}

Controller::Controller(std::unique_ptr<Trace> trace) : trace_(std::move(trace)) {}
Controller::~Controller() { release_request_slot(); }

// The segment holds one request at a time: controllers of one process (an agent, an operator's
// CLI) take turns through an advisory lock on the segment file, held from the request to its
// answer. The kernel drops it if the controller dies; the traced process never takes it.
Status Controller::take_request_slot() {
  if (holds_request_slot_) return Status::Ok();
  const int fd = reader::TraceInternals::fd(*trace_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return Status::FromErrno(
          "cannot lock the segment of process " + std::to_string(trace_->process().pid), errno);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::IoError("another controller of process " +
                             std::to_string(trace_->process().pid) +
                             " kept its request slot for 5 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  holds_request_slot_ = true;
  return Status::Ok();
}

void Controller::release_request_slot() {
  if (!holds_request_slot_) return;
  ::flock(reader::TraceInternals::fd(*trace_), LOCK_UN);
  holds_request_slot_ = false;
}

const ProcessInfo& Controller::process() const { return trace_->process(); }
std::vector<GroupInfo> Controller::groups() const { return trace_->groups(); }

Status Controller::set_group_enabled(const std::string& group, bool enabled) {
  return trace_->set_group_enabled(group, enabled);
}

Result<TriggerInfo> Controller::trigger() {
  Status s = trace_->refresh();
  if (!s.ok()) return s;
  return trace_->process().trigger;
}

Result<uint32_t> Controller::post(std::string_view request, const RemoteTriggerWindow& window) {
  auto* h = reinterpret_cast<abi::SegmentHeader*>(reader::TraceInternals::writable_base(*trace_));
  if (h == nullptr) return Status::Invalid("segment opened read-only");
  if (request.size() >= sizeof(h->trigger_request)) return Status::Invalid("expression too long");
  if (Status s = take_request_slot(); !s.ok()) return s;
  h->trigger_after_events = window.after_events;
  h->trigger_after_ns = window.after_ns;
  std::memset(h->trigger_request, 0, sizeof(h->trigger_request));
  std::memcpy(h->trigger_request, request.data(), request.size());
  uint32_t seq = __atomic_add_fetch(&h->trigger_request_seq, 1, __ATOMIC_ACQ_REL);
  __atomic_fetch_add(&h->control_seq, 1, __ATOMIC_RELEASE);
  sys::futex_wake_all(&h->control_seq);
  return seq;
}

Status Controller::await_answer(uint32_t seq) {
  Status answer = wait_for_answer(seq);
  release_request_slot();
  return answer;
}

Status Controller::wait_for_answer(uint32_t seq) {
  auto* h = reinterpret_cast<abi::SegmentHeader*>(reader::TraceInternals::writable_base(*trace_));
  if (h == nullptr) return Status::Invalid("segment opened read-only");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  auto pause = std::chrono::microseconds(50);
  for (bool last = false; !last;) {
    // Looked at once more after the deadline: this thread may have slept past it.
    last = std::chrono::steady_clock::now() >= deadline;
    // Handled? (The state does not tell: an armed trigger may fire before anyone sees it.)
    // The process writes trigger_error_seq before trigger_done_seq.
    if (__atomic_load_n(&h->trigger_done_seq, __ATOMIC_ACQUIRE) == seq) {
      if (__atomic_load_n(&h->trigger_error_seq, __ATOMIC_ACQUIRE) != seq) return Status::Ok();
      return Status::Invalid(
          std::string(h->trigger_error, ::strnlen(h->trigger_error, sizeof(h->trigger_error))));
    }
    if (!last) std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  return Status::IoError("process " + std::to_string(trace_->process().pid) +
                         " did not answer within 3 s (is its control thread running?)");
}

Status Controller::send(std::string_view request, const RemoteTriggerWindow& window) {
  auto seq = post(request, window);
  if (!seq.ok()) return seq.status();
  return await_answer(*seq);
}

Status Controller::freeze() { return send("freeze", {}); }

Status Controller::signal_freeze() {
  // The writers freeze at their next record (docs/format.md, "Triggers"): bump freeze_seq,
  // then send every writer through its slow path; the control thread, woken, does it for a
  // process that writes nothing.
  auto* base = reader::TraceInternals::writable_base(*trace_);
  if (base == nullptr) return Status::Invalid("segment opened read-only");
  auto* h = reinterpret_cast<abi::SegmentHeader*>(base);
  // The process's clock now (one machine's TSC, or CLOCK_MONOTONIC): from the bump below on,
  // no record begun is kept, so the process stamps its freeze with this, not with the moment
  // it got around to it.
  // The kind from the header itself (one load): process() is the caller's thread's to re-read.
  uint64_t ticks;
  if (__atomic_load_n(&h->clock_kind, __ATOMIC_RELAXED) !=
      static_cast<uint32_t>(abi::ClockKind::kMonotonic)) {
    unsigned aux;
    ticks = __rdtscp(&aux);
  } else {
    ticks = sys::monotonic_ns();
  }
  __atomic_store_n(&h->freeze_request_ticks, ticks, __ATOMIC_RELAXED);
  __atomic_add_fetch(&h->freeze_seq, 1, __ATOMIC_SEQ_CST);
  const uint64_t threads_offset = __atomic_load_n(&h->threads_offset, __ATOMIC_RELAXED);
  const uint64_t slots = __atomic_load_n(&h->max_threads, __ATOMIC_RELAXED);
  if (threads_offset < trace_->size() &&
      slots <= (trace_->size() - threads_offset) / sizeof(abi::ThreadSlot)) {
    for (uint64_t i = 0; i < slots; ++i) {
      auto* slot =
          reinterpret_cast<abi::ThreadSlot*>(base + threads_offset + i * sizeof(abi::ThreadSlot));
      if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) ==
          static_cast<uint32_t>(abi::SlotState::kActive)) {
        __atomic_store_n(&slot->check, 0, __ATOMIC_RELAXED);
      }
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
  }
  __atomic_fetch_add(&h->control_seq, 1, __ATOMIC_RELEASE);
  sys::futex_wake_all(&h->control_seq);
  return Status::Ok();
}

Result<uint32_t> Controller::post_freeze() {
  // The request too: a runtime that predates the signal alone answers it (and it is how the
  // caller learns the process froze).
  if (Status s = signal_freeze(); !s.ok()) return s;
  return post("freeze", {});
}

const uint32_t* Controller::trigger_state_word() const {
  const auto* h =
      reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(*trace_));
  return &h->trigger_state;
}

abi::TriggerState Controller::trigger_state() const {
  uint32_t state = __atomic_load_n(trigger_state_word(), __ATOMIC_ACQUIRE);
  return state <= static_cast<uint32_t>(abi::TriggerState::kFrozen)
             ? static_cast<abi::TriggerState>(state)
             : abi::TriggerState::kNone;
}

Status Controller::arm(std::string_view expression, const RemoteTriggerWindow& window) {
  std::string request = "arm " + std::string(expression);
  return send(request, window);
}

Status Controller::disarm() { return send("disarm", {}); }

Status Controller::resume() {
  auto now = trigger();
  if (!now.ok()) return now.status();
  if (now->state != abi::TriggerState::kFrozen && now->state != abi::TriggerState::kFired) {
    return Status::Invalid("process " + std::to_string(process().pid) +
                           " is not frozen by a trigger");
  }
  return send("resume", {now->after_events, now->after_ns});
}

}  // namespace nanotrace
