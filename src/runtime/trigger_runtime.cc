// In-process triggers: freeze the flight recorder exactly at the event that matters.
//
// Arming marks the matching call sites' enable byte 2, so the hot path calls
// special_event() (trigger_match.cc) for them alone (other sites pay nothing). When a record of an
// armed site satisfies the expression, its thread fires the trigger without taking any lock: it
// publishes which record matched and enters the "firing" phase; then whoever completes the
// firing first (that thread, or any writer that reaches its slow path meanwhile: the firing
// thread may be descheduled at any point) zeroes the `check` of every thread slot, so every
// writer's next record goes through the slow path, stamps the matching record with the
// clock value of that moment, sets the window (an atomic count of events, or a clock
// deadline) and enters the "fired" phase, in which trigger_gate() counts each record against
// the window. So records stamped after the match are exactly the window, plus at most the
// one record each thread had reserved before the switch. The first record past the window
// freezes the rings: the slow path drops every record and never starts a block until
// `resume`.
//
// The right to fire is one token (g_firing). A matching writer takes it; so does the control
// side (arm, disarm, resume, a freeze on request) before it changes the trigger, after
// letting a firing that holds it complete. Each change starts a new round. The phase and the
// round are one word (g_state), and every change a writer makes to it is a compare-and-swap
// of both: a writer acts only on the round it saw, however long it was descheduled. (One that
// saw a firing and completed it after the round was over made a firing of no match, with the
// window's start stamped early: 4,071 records after the "match" against a bound of 1,032, once
// in about 1,000 descheduled runs. One that saw a window end could freeze the next round's
// window at its match.) A writer that matched in an earlier round and wins the token
// afterwards gives it back unused. The segment's trigger_state shows the phase: whoever
// changes the phase publishes it, again if it changed meanwhile, so the last change is what
// readers see.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "base/process.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/duration_runtime.hpp"
#include "runtime/runtime.hpp"
#include "runtime/trigger_state.hpp"

namespace nanotrace::runtime {

// The state word, the armed trigger and the freeze requests answered (trigger_state.hpp).
std::atomic<uint64_t> g_state{0};
std::atomic<const Runtime::ArmedTrigger*> g_armed{nullptr};
std::atomic<uint32_t> g_freeze_seen{0};

namespace {

using abi::TriggerState;

uint32_t* phase_word() { return reinterpret_cast<uint32_t*>(&g_state); }
std::atomic<int64_t> g_remaining{0};
std::atomic<uint64_t> g_deadline{0};  // clock value; 0 = count events
std::atomic<bool> g_firing{false};    // the token: the first matching thread takes it
// The match being fired (valid in kFiring): its unpublished record and its thread's slot.
std::atomic<uint64_t*> g_fire_record{nullptr};
std::atomic<abi::ThreadSlot*> g_fire_slot{nullptr};
std::atomic<const Runtime::ArmedTrigger*> g_fire_armed{nullptr};
std::atomic<uint16_t> g_fire_id{0};
// A match published earlier (a duration trigger's open operation): g_fire_record is null.
EarlierRecord g_fire_earlier;
// The clock value of the last resume or arm (or the segment's start): a freeze_request_ticks
// not after it belongs to a request already answered.
std::atomic<uint64_t> g_requests_after{0};

// The time a freeze asked through freeze_seq takes effect: the controller's stamp if it is
// one of this request (after the last resume, not in the future), else now.
uint64_t request_ticks(const abi::SegmentHeader* h, uint64_t now) {
  const uint64_t asked = __atomic_load_n(&h->freeze_request_ticks, __ATOMIC_RELAXED);
  return asked > g_requests_after.load(std::memory_order_relaxed) && asked <= now ? asked : now;
}

// Shows the phase in the segment (a firing in progress shows as armed). Two threads may
// change the phase one after the other and publish in the other order: each publishes
// again until what it stored is the phase. A fired or frozen state also wakes whoever
// waits on the word (a fleet agent): once per firing, never on the path of an ordinary record.
void publish_state(abi::SegmentHeader* h) {
  uint32_t phase = current_phase(std::memory_order_seq_cst);
  for (;;) {
    const uint32_t shown = phase == kFiring || phase == kCompleting ? kArmedPhase : phase;
    __atomic_store_n(&h->trigger_state, shown, __ATOMIC_SEQ_CST);
    if (shown == static_cast<uint32_t>(TriggerState::kFired) ||
        shown == static_cast<uint32_t>(TriggerState::kFrozen)) {
      sys::futex_wake_all(&h->trigger_state);
    }
    const uint32_t now = current_phase(std::memory_order_seq_cst);
    if (now == phase) return;
    phase = now;
  }
}

bool is_idle_phase(uint32_t phase) { return phase == kArmedPhase || phase == kNonePhase; }
bool is_firing_phase(uint32_t phase) { return phase == kFiring || phase == kCompleting; }

void test_hook(TriggerHookPoint point) {
  if (auto* hook = g_trigger_test_hook.load(std::memory_order_relaxed)) hook(point);
}

// The window of the firing seen in `fired` (a fired state) is over: the rings stop here (or at
// `at`, a request's time, if not 0). Lock-free; the first caller wins. False if the state is no
// longer `fired`: frozen by another, or a new round (whose window this must not end).
bool freeze(Runtime& rt, uint64_t fired, uint64_t at = 0) {
  if (phase_of(fired) != kFiredPhase ||
      !g_state.compare_exchange_strong(fired, with_phase(fired, kFrozenPhase),
                                       std::memory_order_seq_cst)) {
    return false;
  }
  abi::SegmentHeader* h = rt.segment.header();
  // A request made before the match ends the window at the match.
  uint64_t stamp = at != 0 ? std::max(at, __atomic_load_n(&h->trigger_ticks, __ATOMIC_RELAXED))
                           : detail::now_ticks();
  // A time window's rings hold nothing begun after its deadline (trigger_gate): they froze
  // then, whoever noticed later (the control thread woken at the deadline, a writer, a
  // request), as a signalled freeze is stamped with the signal's time. (This round's deadline:
  // stored before its fired phase, which the compare-and-swap read.)
  const uint64_t deadline = g_deadline.load(std::memory_order_relaxed);
  if (deadline != 0) stamp = std::min(stamp, deadline);
  store_fact(&h->frozen_ticks, stamp);
  publish_state(h);
  return true;
}

}  // namespace

void zero_every_check(Runtime& rt) {
  abi::SegmentHeader* h = rt.segment.header();
  for (uint32_t i = 0; i < h->max_threads; ++i) {
    abi::ThreadSlot* s = rt.segment.slot(i);
    // A free or exited slot has no writer (a claim zeroes check itself).
    uint32_t state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    if (state == static_cast<uint32_t>(abi::SlotState::kActive) ||
        state == static_cast<uint32_t>(abi::SlotState::kClaiming)) {
      __atomic_store_n(&s->check, 0, __ATOMIC_RELAXED);
    }
  }
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

namespace {

// Waits, a few hundred stores (or its rescheduling, bounded at about 2 s), while another
// thread completes a firing. True if no firing is in progress any more.
bool await_completion() {
  for (int i = 0; i < 20000; ++i) {
    if (current_phase() != kCompleting) return true;
    if (i < 64) {
      __builtin_ia32_pause();
    } else {
      sys::futex_wait(phase_word(), kCompleting, 100000);
    }
  }
  return current_phase() != kCompleting;
}

// Completes a firing (any thread may): switches every writer, stamps the matching record and
// opens the window. The thread that turns kFiring into kCompleting does it, in the round it
// saw firing; one that finds another completing it waits for that. False if that one did
// not finish within about 2 s (the firing is still in progress).
bool complete_fire(Runtime& rt) {
  uint64_t state = g_state.load(std::memory_order_acquire);
  if (phase_of(state) != kFiring ||
      !g_state.compare_exchange_strong(state, with_phase(state, kCompleting),
                                       std::memory_order_acq_rel)) {
    return await_completion();
  }
  // The firing's facts, stored before its kFiring (a release this compare-and-swap read).
  abi::SegmentHeader* h = rt.segment.header();
  const Runtime::ArmedTrigger& armed = *g_fire_armed.load(std::memory_order_acquire);
  abi::ThreadSlot* slot = g_fire_slot.load(std::memory_order_acquire);
  uint64_t* record = g_fire_record.load(std::memory_order_acquire);
  zero_every_check(rt);
  // Stamped now that every writer is switched: records stamped later are counted in the
  // window (or are the one each thread had in flight).
  uint64_t ticks = detail::now_ticks();
  if (record != nullptr) record[0] = (ticks << 16) | g_fire_id.load(std::memory_order_relaxed);
  test_hook(TriggerHookPoint::kMatchStamped);
  bool freeze_now = armed.after_events == 0 && armed.after_ns == 0;
  g_remaining.store(static_cast<int64_t>(armed.after_events), std::memory_order_relaxed);
  uint64_t deadline = 0;
  if (armed.after_ns != 0) {
    uint64_t hz = ticks_per_second_now(h);
    deadline = ticks + static_cast<uint64_t>(static_cast<double>(armed.after_ns) *
                                             static_cast<double>(hz) / 1e9);
  }
  g_deadline.store(deadline, std::memory_order_relaxed);
  store_fact(&h->trigger_event, g_fire_id.load(std::memory_order_relaxed));
  store_fact(&h->trigger_ticks, ticks);
  if (record == nullptr) {
    if (g_fire_earlier.begin_ticks != 0 && ticks > g_fire_earlier.begin_ticks) {
      store_fact(&h->duration.duration_ticks, ticks - g_fire_earlier.begin_ticks);
    }
    store_fact(&h->trigger_tid, g_fire_earlier.tid);
    store_fact(&h->trigger_slot, g_fire_earlier.slot);
    store_fact(&h->trigger_seq, g_fire_earlier.seq);
  } else {
    store_fact(&h->trigger_tid, __atomic_load_n(&slot->tid, __ATOMIC_RELAXED));
    store_fact(&h->trigger_slot, static_cast<uint32_t>((reinterpret_cast<uint8_t*>(slot) -
                                                        (rt.segment.base + h->threads_offset)) /
                                                       sizeof(abi::ThreadSlot)));
    // The matching record's number (published next).
    store_fact(&h->trigger_seq, __atomic_load_n(&slot->written, __ATOMIC_RELAXED));
  }
  if (freeze_now) store_fact(&h->frozen_ticks, ticks);
  // Nothing else changes the state meanwhile: writers only wait, and the control side takes
  // the token (which the firing holds) or waits for the completion.
  g_state.store(with_phase(state, freeze_now ? kFrozenPhase : kFiredPhase),
                std::memory_order_seq_cst);
  publish_state(h);
  sys::futex_wake_all(phase_word());
  // A time window ends at its deadline even if no writer comes back: the control thread
  // sleeps until then (Runtime::end_time_window_locked).
  if (deadline != 0 && !freeze_now) rt.wake_control_thread();
  return true;
}

// Freezes as of now (or `at`, if not 0) with no matching record (a controller's request).
// REQUIRES: the token taken by the caller, so that no match fires meanwhile. The phase
// first, then every check: a writer between its own check store and its fence sees one of
// them.
void freeze_unmatched(Runtime& rt, uint64_t at = 0) {
  abi::SegmentHeader* h = rt.segment.header();
  const uint64_t ticks = at != 0 ? at : detail::now_ticks();
  store_fact(&h->trigger_event, 0);
  store_fact(&h->trigger_ticks, ticks);
  store_fact(&h->trigger_tid, 0);
  store_fact(&h->trigger_slot, 0);
  store_fact(&h->trigger_seq, 0);
  store_fact(&h->frozen_ticks, ticks);
  g_state.store(with_phase(g_state.load(std::memory_order_relaxed), kFrozenPhase),
                std::memory_order_seq_cst);
  zero_every_check(rt);
  publish_state(h);
}

// A writer's slow path found freeze_seq changed: it freezes the rings itself, without waiting
// for the control thread to be scheduled, if it can take the runtime's lock at once (never
// waiting: the control thread, or whoever holds it, then handles the request, and until then
// this thread's records come here and are dropped: they began after the freeze was asked).
// Under the lock a resume cannot slip in between: a request a resume already answered is not
// taken again.
void freeze_on_request(Runtime& rt, uint32_t wanted) {
  std::unique_lock lock(rt.mu, std::try_to_lock);
  if (!lock.owns_lock() || !rt.started.load(std::memory_order_acquire)) return;
  if (__atomic_load_n(&rt.segment.header()->freeze_seq, __ATOMIC_ACQUIRE) != wanted ||
      g_freeze_seen.load(std::memory_order_relaxed) == wanted) {
    return;
  }
  (void)rt.freeze_locked();
}

// REQUIRES: the token taken by the caller in `armed_state`, the match's facts (g_fire_*)
// stored. Enters the firing phase of that round (the facts published with it) and completes it.
void announce_firing(Runtime& rt, uint64_t armed_state) {
  g_state.store(with_phase(armed_state, kFiring), std::memory_order_seq_cst);
  test_hook(TriggerHookPoint::kFiringAnnounced);
  (void)complete_fire(rt);
}

}  // namespace

Token take_token(Runtime& rt) {
  for (int i = 0; i < 20000; ++i) {
    if (!g_firing.exchange(true, std::memory_order_acq_rel)) return Token::kOurs;
    const uint32_t phase = current_phase();
    if (is_firing_phase(phase)) {
      if (!complete_fire(rt)) return Token::kStuck;
      continue;
    }
    if (!is_idle_phase(phase)) return Token::kFiringDone;
    if (i < 64) {
      __builtin_ia32_pause();
    } else {
      sched_yield();
    }
  }
  return Token::kStuck;
}

Status stuck_firing() { return Status::IoError("a firing in progress did not complete"); }

void start_round(abi::SegmentHeader* h, TriggerState phase) {
  g_requests_after.store(detail::now_ticks(), std::memory_order_relaxed);
  // A writer may end the last round's window meanwhile (a compare-and-swap from fired, which
  // this store makes fail or overwrites): nothing else changes the state without the token.
  const uint64_t round = (g_state.load(std::memory_order_relaxed) >> 32) + 1;
  g_state.store(round << 32 | static_cast<uint32_t>(phase), std::memory_order_seq_cst);
  publish_state(h);
  g_firing.store(false, std::memory_order_release);
}

void fire(Runtime& rt, const Runtime::ArmedTrigger& armed, const detail::Site& site,
          uint64_t* record, uint64_t armed_state) {
  g_fire_record.store(record, std::memory_order_relaxed);
  g_fire_slot.store(detail::t_writer.owned, std::memory_order_relaxed);
  g_fire_armed.store(&armed, std::memory_order_relaxed);
  g_fire_id.store(site.id, std::memory_order_relaxed);
  announce_firing(rt, armed_state);
}

std::atomic<void (*)(TriggerHookPoint)> g_trigger_test_hook{nullptr};

uint64_t trigger_state_seen() noexcept { return g_state.load(std::memory_order_acquire); }

bool take_fire_token(uint64_t armed_state) noexcept {
  if (phase_of(armed_state) != kArmedPhase) return false;
  // One thread wins the race to fire; a record of another that matched at the same time
  // was reserved before the switch and is published like any in flight.
  if (g_firing.exchange(true, std::memory_order_acq_rel)) return false;
  // The trigger changed since the match was seen (re-armed, disarmed, resumed, or fired and
  // resumed): the token goes back unused.
  if (g_state.load(std::memory_order_acquire) != armed_state) {
    g_firing.store(false, std::memory_order_release);
    return false;
  }
  return true;
}

void give_back_fire_token() noexcept { g_firing.store(false, std::memory_order_release); }

void fire_on_record(const Runtime::ArmedTrigger& armed, const detail::Site& site, uint64_t* record,
                    uint64_t armed_state) noexcept {
  fire(Runtime::instance(), armed, site, record, armed_state);
}

void fire_on_earlier_record(const Runtime::ArmedTrigger& armed, const EarlierRecord& match,
                            uint64_t armed_state) noexcept {
  g_fire_earlier = match;  // published by announce_firing's store of the state
  g_fire_record.store(nullptr, std::memory_order_relaxed);
  g_fire_slot.store(nullptr, std::memory_order_relaxed);
  g_fire_armed.store(&armed, std::memory_order_relaxed);
  g_fire_id.store(match.event, std::memory_order_relaxed);
  announce_firing(Runtime::instance(), armed_state);
}

TriggerGate trigger_gate() noexcept {
  Runtime& rt = Runtime::instance();
  const uint32_t wanted = __atomic_load_n(&rt.segment.header()->freeze_seq, __ATOMIC_ACQUIRE);
  if (wanted != g_freeze_seen.load(std::memory_order_relaxed)) {
    freeze_on_request(rt, wanted);
    if (wanted != g_freeze_seen.load(std::memory_order_relaxed)) return TriggerGate::kDeny;
  }
  // Looked at again after helping a firing, or when the round changed under this thread
  // (bounded: a round is a resume or an arm, done under the runtime's lock).
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint64_t state = g_state.load(std::memory_order_acquire);
    if (is_firing_phase(phase_of(state))) {
      test_hook(TriggerHookPoint::kGateSawFiring);
      // Helps a firing thread that may be descheduled, then looks at the state it left.
      if (complete_fire(rt)) continue;
      // Its completer did not go on within about 2 s: the record goes, counted.
      if (abi::ThreadSlot* own = detail::t_writer.owned) {
        asm volatile("addq $1, %0" : "+m"(own->dropped));
      }
      return TriggerGate::kDeny;
    }
    const uint32_t phase = phase_of(state);
    if (is_idle_phase(phase)) return TriggerGate::kAllow;
    if (phase != kFiredPhase) return TriggerGate::kDeny;
    // The window's figures may be a later round's (this thread descheduled since it read the
    // state): a record admitted by them is inside the window running now, and one they reject
    // tries to freeze the round it saw, which fails if that is over.
    const uint64_t deadline = g_deadline.load(std::memory_order_acquire);
    const bool inside = deadline != 0 ? detail::now_ticks() <= deadline
                                      : g_remaining.fetch_sub(1, std::memory_order_acq_rel) > 0;
    if (inside) return TriggerGate::kWindow;
    test_hook(TriggerHookPoint::kGateEndsWindow);
    if (freeze(rt, state)) return TriggerGate::kDeny;
    if (current_phase() == kFrozenPhase) return TriggerGate::kDeny;  // another froze it
  }
  // No verdict in four looks (the state changed under this thread each time): the record
  // goes, counted.
  if (abi::ThreadSlot* own = detail::t_writer.owned) {
    asm volatile("addq $1, %0" : "+m"(own->dropped));
  }
  return TriggerGate::kDeny;
}

bool trigger_active() noexcept {
  if (!is_idle_phase(current_phase(std::memory_order_seq_cst))) return true;
  // A freeze asked for meanwhile (the controller bumps freeze_seq, then zeroes every check).
  const uint32_t wanted =
      __atomic_load_n(&Runtime::instance().segment.header()->freeze_seq, __ATOMIC_SEQ_CST);
  return wanted != g_freeze_seen.load(std::memory_order_relaxed);
}

void Runtime::reset_trigger_after_fork() {
  if (armed != nullptr) retired_triggers.push_back(armed);
  armed = nullptr;
  trigger_requests_seen = 0;
  g_armed.store(nullptr, std::memory_order_relaxed);
  g_state.store(0, std::memory_order_relaxed);  // round 0, no trigger
  g_firing.store(false, std::memory_order_relaxed);
  g_freeze_seen.store(0, std::memory_order_relaxed);  // the child's new segment starts at 0
  g_requests_after.store(0, std::memory_order_relaxed);
}

void Runtime::forget_freeze_requests() {
  g_freeze_seen.store(__atomic_load_n(&segment.header()->freeze_seq, __ATOMIC_ACQUIRE),
                      std::memory_order_relaxed);
  g_requests_after.store(detail::now_ticks(), std::memory_order_relaxed);
}

Status Runtime::freeze_locked() {
  if (!started) return Status::NotFound("tracing is not running");
  abi::SegmentHeader* h = segment.header();
  // Asked through freeze_seq (a controller's signal): the freeze is as of the request, since
  // every record begun after it is dropped (trigger_gate).
  const uint32_t wanted = __atomic_load_n(&h->freeze_seq, __ATOMIC_ACQUIRE);
  const uint64_t at = wanted != g_freeze_seen.load(std::memory_order_relaxed)
                          ? request_ticks(h, detail::now_ticks())
                          : 0;
  g_freeze_seen.store(wanted, std::memory_order_relaxed);
  if (current_phase() == kFrozenPhase) return Status::Ok();
  switch (take_token(*this)) {
    case Token::kStuck:
      return stuck_firing();
    case Token::kOurs:
      freeze_unmatched(*this, at);  // the token stays taken until the next round
      return Status::Ok();
    case Token::kFiringDone:
      // A match that fired (its window running) wins: its facts stay, its window ends here.
      (void)freeze(*this, g_state.load(std::memory_order_acquire), at);
      return Status::Ok();
  }
  return Status::Ok();
}

void Runtime::process_freeze_request_locked() {
  if (!started) return;
  const uint32_t wanted = __atomic_load_n(&segment.header()->freeze_seq, __ATOMIC_ACQUIRE);
  if (wanted != g_freeze_seen.load(std::memory_order_relaxed)) (void)freeze_locked();
}

uint64_t Runtime::end_time_window_locked() {
  const uint64_t state = g_state.load(std::memory_order_acquire);
  if (!started || phase_of(state) != kFiredPhase) return 0;
  // The deadline of this firing: it was stored before the phase (a release), and no other
  // firing can start while mu is held (a new round needs it).
  const uint64_t deadline = g_deadline.load(std::memory_order_acquire);
  if (deadline == 0) return 0;  // a count window: the writers end it
  const uint64_t now = detail::now_ticks();
  if (now > deadline) {
    // Nothing stamped after the deadline was admitted (trigger_gate): the rings hold exactly
    // the window already, and stop now.
    (void)freeze(*this, state);
    return 0;
  }
  const double hz = static_cast<double>(ticks_per_second_now(segment.header()));
  // Rounded up, plus a microsecond: woken before the deadline, the thread would only sleep
  // again.
  return static_cast<uint64_t>(static_cast<double>(deadline - now) * 1e9 / hz) + 1000;
}

}  // namespace nanotrace::runtime
