// The slow path of a tracepoint: claiming a ring on a thread's first event, starting a new
// block when the current one is full, a fired trigger's window, and the mode's policy when
// the ring is full (overwrite, drop and count, or wait a bounded time for the consumer).
// Also releases a thread's ring when the thread exits. The fast path is in
// nanotrace/nanotrace.hpp.
//
// Nothing here takes the runtime mutex once the segment exists: slots are claimed by
// compare-and-swap on their state, so a thread's first event never waits for another's.
// Every record dropped here is counted in its slot's `dropped` (one instruction, so a signal
// handler on the same thread cannot lose an increment).
#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>

#include "base/clock.hpp"
#include "base/process.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::detail {

abi::ThreadSlot g_unclaimed_slot{};
abi::ThreadSlot g_busy_slot{};
constinit thread_local Writer t_writer{nullptr, 0, &g_unclaimed_slot, nullptr};
constinit thread_local bool t_runtime_io = false;

}  // namespace nanotrace::detail

namespace nanotrace::runtime {
namespace {

using abi::SlotState;
using detail::t_writer;

constexpr uint32_t state_of(SlotState s) { return static_cast<uint32_t>(s); }

// What a thread's slow path remembers between calls (the fast path never reads it).
struct SlowState {
  bool no_slot = false;            // its last claim failed ...
  uint32_t no_slot_epoch = 0;      // ... while slot_epoch had this value
  bool consumer_stuck = false;     // its last wait for the consumer timed out ...
  uint64_t stuck_at_consumed = 0;  // ... with the consumer at this position
  uint32_t consumer_pid = 0;       // liveness cache
  bool consumer_live = false;
  uint64_t consumer_checked_ns = 0;
};
thread_local SlowState t_slow;

using sys::monotonic_ns;

// Whether a consumer is attached and alive: it holds the consumer lock of the segment, which
// the kernel drops when it dies (even unreaped) or execs. Checked only when a ring is full or
// a thread finds no slot, and cached for a millisecond.
bool consumer_alive(Runtime& rt) {
  abi::SegmentHeader* h = rt.segment.header();
  uint32_t pid = __atomic_load_n(&h->consumer_pid, __ATOMIC_ACQUIRE);
  if (pid == 0) return false;
  uint64_t now = monotonic_ns();
  if (pid != t_slow.consumer_pid || now - t_slow.consumer_checked_ns > 1000000) {
    t_slow.consumer_live = sys::segment_byte_locked(
        __atomic_load_n(&rt.segment.fd, __ATOMIC_ACQUIRE), sys::kConsumerLockByte);
    t_slow.consumer_pid = pid;
    t_slow.consumer_checked_ns = now;
  }
  return t_slow.consumer_live;
}

// Whether a block-mode writer should wait for a consumer: one is attached and alive, or,
// under `nanotrace run` (which attaches to each process once its scan finds it), none has
// attached to this process yet and the recorder is on its way. Once one was seen, a consumer
// gone means the recording ended: nobody is waited for.
bool consumer_awaited(Runtime& rt) {
  if (consumer_alive(rt)) {
    rt.consumer_seen.store(true, std::memory_order_relaxed);
    return true;
  }
  return rt.config.run_id != 0 && !rt.consumer_seen.load(std::memory_order_relaxed);
}

// Announces that a slot became reusable (a thread exited, or the consumer drained one).
void bump_slot_epoch(abi::SegmentHeader* h) {
  __atomic_fetch_add(&h->slot_epoch, 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&h->slot_waiters, __ATOMIC_SEQ_CST) != 0) sys::futex_wake_all(&h->slot_epoch);
}

// What the consumer has read of the slot's current thread: its counts describe the
// generation it stored last, and another generation's mean nothing of this one was read.
struct Consumed {
  uint64_t position = 0, records = 0, dropped = 0;
};
Consumed consumed_of_this_generation(const abi::ThreadSlot* s) {
  Consumed c;
  if (__atomic_load_n(&s->consumed_generation, __ATOMIC_ACQUIRE) !=
      __atomic_load_n(&s->generation, __ATOMIC_ACQUIRE)) {
    return c;
  }
  c.position = __atomic_load_n(&s->consumed, __ATOMIC_ACQUIRE);
  c.records = __atomic_load_n(&s->consumed_records, __ATOMIC_ACQUIRE);
  c.dropped = __atomic_load_n(&s->consumed_dropped, __ATOMIC_ACQUIRE);
  return c;
}

bool try_take(abi::ThreadSlot* s, uint32_t expected) {
  return __atomic_compare_exchange_n(&s->state, &expected, state_of(SlotState::kClaiming), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

// Initialises slot i, taken from state `previous`, for the calling thread.
bool finish_claim(Runtime& rt, uint32_t i, uint32_t previous) {
  Segment& seg = rt.segment;
  abi::SegmentHeader* h = seg.header();
  abi::ThreadSlot* s = seg.slot(i);
  // An unprepared ring is allocated a block at a time by block_memory_ready.
  // Taking memory the control thread made ready asks it to make more.
  bool was_prepared = __atomic_load_n(&s->prepared, __ATOMIC_ACQUIRE) != 0 ||
                      (previous == state_of(SlotState::kFree) &&
                       __atomic_load_n(&s->allocated_blocks, __ATOMIC_ACQUIRE) != 0);
  if (previous == state_of(SlotState::kExited)) {
    // Records of the previous thread nobody read, and drops nobody reported, are lost.
    Consumed c = consumed_of_this_generation(s);
    uint64_t unread = s->written - c.records + s->dropped - c.dropped;
    if (unread != 0) __atomic_fetch_add(&h->lost_reclaimed, unread, __ATOMIC_RELAXED);
  }
  // Readers detect reuse through the generation, bumped before anything else changes.
  __atomic_store_n(&s->generation, s->generation + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&s->head, 0, __ATOMIC_RELEASE);
  s->written = 0;
  s->dropped = 0;
  s->check = 0;
  s->tid = static_cast<uint32_t>(gettid());
  s->writer_waiting = 0;
  s->start_ticks = detail::now_ticks();
  char name[17] = {};
  prctl(PR_GET_NAME, name);
  std::memcpy(s->name, name, sizeof(s->name));
  __atomic_store_n(&s->consumed, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&s->consumed_records, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&s->consumed_dropped, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&s->state, state_of(SlotState::kActive), __ATOMIC_RELEASE);
  // t_writer.slot stays as the fast path set it (busy) until the record is published.
  t_writer.data = seg.ring(i);
  t_writer.mask = h->ring_size - 1u;
  t_writer.owned = s;
  pthread_setspecific(rt.exit_key, s);
  rt.any_ring_claimed.store(true, std::memory_order_relaxed);
  rt.note_slot_used(i);
  if (rt.rings_claimed.fetch_add(1, std::memory_order_relaxed) + 1 == kRingsBeforePreparing) {
    rt.request_ring_preparation();  // the program has threads: make rings ready for more
  } else if (was_prepared && previous == state_of(SlotState::kFree)) {
    rt.took_ready_slot();
  }
  t_slow.no_slot = false;
  return true;
}

// Whether the consumer has read everything of the exited thread in slot s.
bool drained(const abi::ThreadSlot* s) {
  Consumed c = consumed_of_this_generation(s);
  return c.position >= __atomic_load_n(&s->head, __ATOMIC_ACQUIRE) && c.records >= s->written;
}

// Takes exited slot i if the consumer has read all of it. Between the check and the take,
// other threads may claim the slot, write and exit: the state is kExited again, the check
// was about the thread before, and a take on the state alone loses the new thread's records
// to lost_reclaimed (a thread preempted there did, under ASan). So the take compares the
// generation too, in one 64-bit compare-and-swap: every claim bumps it.
bool take_drained(Runtime& rt, uint32_t i) {
  static_assert(offsetof(abi::ThreadSlot, generation) == offsetof(abi::ThreadSlot, state) + 4 &&
                offsetof(abi::ThreadSlot, state) % 8 == 0 &&
                std::endian::native == std::endian::little);
  abi::ThreadSlot* s = rt.segment.slot(i);
  const uint64_t generation = __atomic_load_n(&s->generation, __ATOMIC_ACQUIRE);
  if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != state_of(SlotState::kExited) || !drained(s)) {
    return false;
  }
  uint64_t expected = state_of(SlotState::kExited) | generation << 32;
  const uint64_t claiming = state_of(SlotState::kClaiming) | generation << 32;
  auto* state_and_generation = reinterpret_cast<uint64_t*>(&s->state);
  return __atomic_compare_exchange_n(state_and_generation, &expected, claiming, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) &&
         finish_claim(rt, i, state_of(SlotState::kExited));
}

// What a slot offers a thread that claims one, best first: a claim takes the best kind
// there is. A free slot whose ring is ready; an exited thread's slot that the consumer has
// drained (its memory is allocated); a free slot whose first block is ready; any free slot
// (its ring is allocated as it is written). kNone: in use, being claimed, or exited with
// unread records (taken only as a last resort: OldestExited).
enum class Reusable : int { kReadyFree, kDrainedExited, kFreeWithBlock, kFree, kNone };

// What slot s, seen in `state`, offers. Whether an exited slot is drained is checked only if
// check_drained (it reads the consumer's line of the slot).
Reusable reusable_kind(const abi::ThreadSlot* s, uint32_t state, bool check_drained) {
  if (state == state_of(SlotState::kFree)) {
    if (__atomic_load_n(&s->prepared, __ATOMIC_ACQUIRE) != 0) return Reusable::kReadyFree;
    if (__atomic_load_n(&s->allocated_blocks, __ATOMIC_ACQUIRE) != 0) {
      return Reusable::kFreeWithBlock;
    }
    return Reusable::kFree;
  }
  if (state == state_of(SlotState::kExited) && check_drained && drained(s)) {
    return Reusable::kDrainedExited;
  }
  return Reusable::kNone;
}

// Takes slot i, which offered `kind` in `state`. False if another thread took it first.
bool take_reusable(Runtime& rt, uint32_t i, Reusable kind, uint32_t state) {
  if (kind == Reusable::kDrainedExited) return take_drained(rt, i);
  return try_take(rt.segment.slot(i), state) && finish_claim(rt, i, state);
}

// The exited slot claimed longest ago: with every slot in use and no live consumer to wait
// for, a claim takes it, and its unread records are counted in lost_reclaimed.
struct OldestExited {
  int64_t slot = -1;
  uint64_t start_ticks = ~uint64_t{0};
  void see(uint32_t i, const abi::ThreadSlot* s, uint32_t state) {
    if (state == state_of(SlotState::kExited) && s->start_ticks < start_ticks) {
      start_ticks = s->start_ticks;
      slot = i;
    }
  }
  bool take(Runtime& rt) const {
    const uint32_t exited = state_of(SlotState::kExited);
    return slot >= 0 && try_take(rt.segment.slot(static_cast<uint32_t>(slot)), exited) &&
           finish_claim(rt, static_cast<uint32_t>(slot), exited);
  }
};

// Takes a reusable slot, best first (Reusable), going slot by slot: one pass per kind (which
// also takes a better free slot), each going on past slots other threads take meanwhile, so a
// thread among many claiming at once still finds a free slot if there is one. With none, and no
// live consumer, takes the oldest exited slot.
bool claim_slot_by_slot(Runtime& rt) {
  Segment& seg = rt.segment;
  const uint32_t n = seg.header()->max_threads;
  // Slots past the scan limit are untouched and free: only the last pass looks there, and
  // finds a free slot at the limit at the latest (or past it, when other threads took those
  // meanwhile).
  const uint32_t limit = rt.slot_scan_limit();
  for (int wanted = 0; wanted < static_cast<int>(Reusable::kNone); ++wanted) {
    const bool last_pass = wanted == static_cast<int>(Reusable::kFree);
    const bool check_drained = wanted == static_cast<int>(Reusable::kDrainedExited);
    for (uint32_t i = 0; i < (last_pass ? n : limit); ++i) {
      const uint32_t state = __atomic_load_n(&seg.slot(i)->state, __ATOMIC_ACQUIRE);
      const Reusable kind = reusable_kind(seg.slot(i), state, check_drained);
      if (static_cast<int>(kind) <= wanted && take_reusable(rt, i, kind, state)) return true;
    }
  }
  if (consumer_alive(rt)) return false;  // never take unread records from a live consumer
  for (int attempt = 0; attempt < 4; ++attempt) {
    OldestExited oldest;
    for (uint32_t i = 0; i < n; ++i) {
      oldest.see(i, seg.slot(i), __atomic_load_n(&seg.slot(i)->state, __ATOMIC_ACQUIRE));
    }
    if (oldest.slot < 0) return false;
    if (oldest.take(rt)) return true;
  }
  return false;
}

// The same choice in one scan, which finds the first slot of each kind: a thread's first event
// reads every slot's state once, where claim_slot_by_slot reads it once per kind (4-5 scans
// of 256 slots once they are all used: several microseconds). False if it could not take
// what it found (another thread took it first) or found nothing; the caller then goes slot
// by slot.
bool claim_in_one_scan(Runtime& rt) {
  Segment& seg = rt.segment;
  const uint32_t n = seg.header()->max_threads;
  const uint32_t limit = rt.slot_scan_limit();  // past it every slot is free and untouched
  constexpr int kKinds = static_cast<int>(Reusable::kNone);
  int64_t first[kKinds] = {-1, -1, -1, -1};  // the first slot of each kind
  OldestExited oldest;
  for (uint32_t i = 0; i < limit; ++i) {
    abi::ThreadSlot* s = seg.slot(i);
    const uint32_t state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    const bool check_drained = first[static_cast<int>(Reusable::kDrainedExited)] < 0;
    const Reusable kind = reusable_kind(s, state, check_drained);
    if (kind == Reusable::kReadyFree) {
      if (take_reusable(rt, i, kind, state)) return true;
    } else if (kind != Reusable::kNone && first[static_cast<int>(kind)] < 0) {
      first[static_cast<int>(kind)] = i;
    }
    oldest.see(i, s, state);
  }
  bool any_reusable = false;
  for (int k = static_cast<int>(Reusable::kDrainedExited); k < kKinds; ++k) {
    if (first[k] < 0) continue;
    any_reusable = true;
    const auto kind = static_cast<Reusable>(k);
    const uint32_t state =
        state_of(kind == Reusable::kDrainedExited ? SlotState::kExited : SlotState::kFree);
    if (take_reusable(rt, static_cast<uint32_t>(first[k]), kind, state)) return true;
  }
  // Every slot in use and none drained: the oldest exited one, if nobody reads it.
  if (any_reusable || limit < n || oldest.slot < 0 || consumer_alive(rt)) return false;
  return oldest.take(rt);
}

bool claim_once(Runtime& rt) { return claim_in_one_scan(rt) || claim_slot_by_slot(rt); }

// Claims a slot for the calling thread. In block mode with a live consumer, waits (at most
// the block timeout) for the consumer to drain an exited thread's slot rather than drop.
// A thread whose claim failed does not scan again until a slot has been released.
bool claim_for_this_thread(Runtime& rt) {
  abi::SegmentHeader* h = rt.segment.header();
  uint32_t epoch = __atomic_load_n(&h->slot_epoch, __ATOMIC_ACQUIRE);
  if (t_slow.no_slot && epoch == t_slow.no_slot_epoch) return false;
  if (claim_once(rt)) return true;
  auto mode = static_cast<abi::Mode>(h->mode);
  uint64_t timeout = h->block_timeout_ns;
  if (mode == abi::Mode::kBlock && timeout != 0 && consumer_alive(rt)) {
    uint64_t start = monotonic_ns();
    __atomic_fetch_add(&h->slot_waiters, 1, __ATOMIC_SEQ_CST);
    bool claimed = false;
    for (;;) {
      uint64_t now = monotonic_ns();
      if (now - start >= timeout || !consumer_alive(rt)) break;
      uint64_t left = timeout - (now - start);
      sys::futex_wait(&h->slot_epoch, epoch, static_cast<long>(left < 5000000 ? left : 5000000));
      epoch = __atomic_load_n(&h->slot_epoch, __ATOMIC_ACQUIRE);
      if (claim_once(rt)) {
        claimed = true;
        break;
      }
    }
    __atomic_fetch_sub(&h->slot_waiters, 1, __ATOMIC_SEQ_CST);
    if (claimed) return true;
  }
  t_slow.no_slot = true;
  t_slow.no_slot_epoch = epoch;
  return false;
}

// Whether the block beginning at `start` has been open longer than rt.block_max_age_ticks
// (kBlockMaxAgeTicks): its next record begins a new one, so that no record's 48-bit stamp is
// read against a base hours older (an idle thread's).
bool block_outlived(const Runtime& rt, const detail::Writer& w, uint64_t start) {
  const auto* bh = reinterpret_cast<const abi::BlockHeader*>(w.data + (start & w.mask));
  const uint64_t now = detail::now_ticks();
  return now > bh->base_ticks &&
         now - bh->base_ticks > rt.block_max_age_ticks.load(std::memory_order_relaxed);
}

// Whether the block starting at `next` may be written: always in overwrite mode; in the
// other modes once the consumer has read the block one ring earlier, waiting for that in
// block mode while the consumer lives, at most the block timeout (and not at all while a
// consumer that made us time out has not moved since).
bool room_for_block(Runtime& rt, abi::ThreadSlot* s, uint64_t next, uint64_t block) {
  abi::SegmentHeader* h = rt.segment.header();
  auto mode = static_cast<abi::Mode>(h->mode);
  if (mode == abi::Mode::kOverwrite) return true;
  auto has_room = [&] {
    return consumed_of_this_generation(s).position + h->ring_size >= next + block;
  };
  if (has_room()) {
    t_slow.consumer_stuck = false;
    return true;
  }
  uint64_t timeout = h->block_timeout_ns;
  if (mode == abi::Mode::kDiscard || timeout == 0 || !consumer_awaited(rt)) return false;
  if (t_slow.consumer_stuck &&
      consumed_of_this_generation(s).position == t_slow.stuck_at_consumed) {
    return false;
  }
  uint64_t start = monotonic_ns();
  bool room = false;
  for (;;) {
    uint32_t seq = __atomic_load_n(&s->consumer_seq, __ATOMIC_ACQUIRE);
    __atomic_store_n(&s->writer_waiting, 1, __ATOMIC_SEQ_CST);
    if (has_room()) {
      room = true;
      break;
    }
    uint64_t waited = monotonic_ns() - start;
    if (waited >= timeout || !consumer_awaited(rt)) break;
    uint64_t left = timeout - waited;
    sys::futex_wait(&s->consumer_seq, seq, static_cast<long>(left < 20000000 ? left : 20000000));
  }
  __atomic_store_n(&s->writer_waiting, 0, __ATOMIC_RELAXED);
  t_slow.consumer_stuck = !room;
  if (!room) t_slow.stuck_at_consumed = consumed_of_this_generation(s).position;
  return room;
}

// Makes sure the memory of the block at `next` is allocated before the writer touches it
// (so /dev/shm running full costs counted drops, never a SIGBUS). Only a ring nobody
// prepared in advance, on its first lap, has unallocated blocks: one fallocate per block.
bool block_memory_ready(Runtime& rt, abi::ThreadSlot* s, uint64_t next, uint64_t block) {
  if (__atomic_load_n(&s->prepared, __ATOMIC_ACQUIRE) != 0) return true;
  const uint64_t ring = rt.segment.header()->ring_size;
  if (next >= ring) return true;  // a later lap: every block was allocated on the first
  uint64_t index = next / block;
  if (index < __atomic_load_n(&s->allocated_blocks, __ATOMIC_ACQUIRE)) return true;
  uint64_t offset = static_cast<uint64_t>(t_writer.data - rt.segment.base) + next;
  if (!segment_fd_is_ours(rt.segment)) {
    // The program took our descriptor's number (segment_descriptor.cc). Never wait for the
    // lock here: this thread may hold it (a signal handler's record).
    std::unique_lock lock(rt.mu, std::try_to_lock);
    if (!lock.owns_lock() || !reclaim_segment_fd(&rt.segment)) return false;
  }
  if (posix_fallocate(__atomic_load_n(&rt.segment.fd, __ATOMIC_ACQUIRE), static_cast<off_t>(offset),
                      static_cast<off_t>(block)) != 0) {
    return false;
  }
  map_for_writing(rt.segment, offset, abi::kBlockHeaderBytes);  // where the block starts
  // The control thread may set the first block of a slot it believes free: the larger wins.
  uint32_t have = __atomic_load_n(&s->allocated_blocks, __ATOMIC_RELAXED);
  while (have < index + 1 &&
         !__atomic_compare_exchange_n(&s->allocated_blocks, &have, static_cast<uint32_t>(index + 1),
                                      true, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
  }
  if ((index + 1) * block >= ring) __atomic_store_n(&s->prepared, 1, __ATOMIC_RELEASE);
  return true;
}

}  // namespace

uint32_t Runtime::slot_scan_limit() const {
  uint32_t bound = slots_used_bound.load(std::memory_order_acquire);
  return std::min(bound + 1, segment.header()->max_threads);
}

void Runtime::note_slot_used(uint32_t i) {
  uint32_t bound = slots_used_bound.load(std::memory_order_relaxed);
  while (bound < i + 1 &&
         !slots_used_bound.compare_exchange_weak(bound, i + 1, std::memory_order_acq_rel)) {
  }
}

void Runtime::request_ring_preparation() { wake_control_thread(); }

void release_ring(void* slot_ptr) {
  auto* slot = static_cast<abi::ThreadSlot*>(slot_ptr);
  detail::Writer& w = t_writer;
  // Only this thread's own live claim (not a slot inherited across fork, say).
  if (slot == nullptr || w.owned != slot) return;
  // Events recorded later by this thread (other TLS destructors) claim a fresh ring.
  w = detail::Writer{nullptr, 0, &detail::g_unclaimed_slot, nullptr};
  __atomic_store_n(&slot->check, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->state, state_of(SlotState::kExited), __ATOMIC_RELEASE);
  Runtime& rt = Runtime::instance();
  if (rt.started.load(std::memory_order_acquire)) bump_slot_epoch(rt.segment.header());
}

}  // namespace nanotrace::runtime

namespace nanotrace::detail {

uint64_t reserve_slow(uint32_t bytes, abi::ThreadSlot* slot) noexcept {
  using runtime::Runtime;
  using runtime::TriggerGate;
  if (const runtime::RuntimeApi* owner = runtime::g_forward) {
    return runtime::forward_reserve(*owner, bytes, slot);
  }
  Writer& w = t_writer;
  Runtime& rt = Runtime::instance();
  if (slot == &g_busy_slot) {
    // A tracepoint in a signal handler interrupted one on this thread: the ring is the
    // interrupted record's until it is published, so this record is dropped and counted.
    if (abi::ThreadSlot* own = w.owned) {
      asm volatile("addq $1, %0" : "+m"(own->dropped));
    } else if (rt.started.load(std::memory_order_acquire)) {
      __atomic_fetch_add(&rt.segment.header()->lost_no_slot, 1, __ATOMIC_RELAXED);
    }
    return kNoSpace;
  }
  if (w.owned == nullptr) {
    if (!rt.started.load(std::memory_order_acquire) && !rt.ensure_started()) return kNoSpace;
    if (!runtime::claim_for_this_thread(rt)) {
      __atomic_fetch_add(&rt.segment.header()->lost_no_slot, 1, __ATOMIC_RELAXED);
      return kNoSpace;
    }
  }
  abi::ThreadSlot* s = w.owned;
  TriggerGate gate = runtime::trigger_gate();
  if (gate == TriggerGate::kDeny) {
    __atomic_store_n(&s->check, 0, __ATOMIC_RELAXED);
    return kNoSpace;  // frozen: not recorded, and not a loss
  }
  abi::SegmentHeader* h = rt.segment.header();
  const uint64_t block = h->block_size;
  uint64_t head = s->head;
  uint64_t in_block = head & (block - 1);
  uint64_t block_end;
  // A block too old for its records' stamps is ended as a full one is. Not looked at in a
  // trigger's window, where every record comes this way.
  if (in_block != 0 && in_block + bytes <= block &&
      (gate != TriggerGate::kAllow || !runtime::block_outlived(rt, w, head - in_block))) {
    block_end = head - in_block + block;
  } else {
    uint64_t next = in_block == 0 ? head : head - in_block + block;
    if (!runtime::room_for_block(rt, s, next, block) ||
        !runtime::block_memory_ready(rt, s, next, block)) {
      asm volatile("addq $1, %0" : "+m"(s->dropped));
      __atomic_store_n(&s->check, 0, __ATOMIC_RELAXED);  // come back here for the next record
      return kNoSpace;
    }
    if (in_block != 0) {
      // End marker: a zero word stops a reader before stale bytes of an older lap.
      *reinterpret_cast<uint64_t*>(w.data + (head & w.mask)) = 0;
    }
    auto* bh = reinterpret_cast<abi::BlockHeader*>(w.data + (next & w.mask));
    bh->position = next;
    bh->first_seq = s->written;
    bh->base_ticks = now_ticks();
    head = next + abi::kBlockHeaderBytes;
    // Publish the block start so a reader sees an empty block rather than a stale one.
    __atomic_store_n(&s->head, head, __ATOMIC_RELEASE);
    block_end = next + block;
  }
  if (gate == TriggerGate::kWindow) {
    __atomic_store_n(&s->check, 0, __ATOMIC_RELAXED);
  } else {
    // A trigger firing now zeroes every check after announcing itself; whichever of its
    // store and ours comes last, the fence makes one of us see the other.
    __atomic_store_n(&s->check, block_end, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (runtime::trigger_active()) __atomic_store_n(&s->check, 0, __ATOMIC_RELAXED);
  }
  return head;
}

}  // namespace nanotrace::detail
