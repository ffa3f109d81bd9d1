// The slow path of a tracepoint: claiming a ring on a thread's first event, starting a new
// block when the current one is full, and the mode's policy when the ring is full
// (overwrite, drop and count, or wait for the consumer). Also releases a thread's ring when
// the thread exits. The fast path is in nanotrace/nanotrace.hpp.
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/process.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::detail {

abi::ThreadSlot g_unclaimed_slot{};
constinit thread_local Writer t_writer{nullptr, 0, 0, &g_unclaimed_slot};

}  // namespace nanotrace::detail

namespace nanotrace::runtime {
namespace {

using abi::SlotState;

bool consumer_alive(const abi::SegmentHeader* h) {
  pid_t consumer = static_cast<pid_t>(__atomic_load_n(&h->consumer_pid, __ATOMIC_ACQUIRE));
  return consumer != 0 && (kill(consumer, 0) == 0 || errno == EPERM);
}

}  // namespace

void release_ring(void* slot_ptr) {
  auto* slot = static_cast<abi::ThreadSlot*>(slot_ptr);
  // Events recorded later by this thread (other TLS destructors) claim a fresh ring.
  detail::t_writer = detail::Writer{nullptr, 0, 0, &detail::g_unclaimed_slot};
  if (Runtime::instance().pid != getpid()) return;
  __atomic_store_n(&slot->state, static_cast<uint32_t>(SlotState::kExited), __ATOMIC_RELEASE);
}

namespace {

// A reusable slot: free first; then an exited ring the consumer has fully read; then (no
// consumer to wait for) the exited ring that was claimed longest ago, whose unread records
// are counted in lost_reclaimed.
int pick_slot_locked(Runtime& rt) {
  abi::SegmentHeader* h = rt.segment.header();
  int drained = -1, oldest = -1;
  uint64_t oldest_start = ~uint64_t{0};
  for (uint32_t i = 0; i < h->max_threads; ++i) {
    abi::ThreadSlot* s = rt.segment.slot(i);
    uint32_t state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    if (state == static_cast<uint32_t>(SlotState::kFree)) return static_cast<int>(i);
    if (state != static_cast<uint32_t>(SlotState::kExited)) continue;
    if (drained < 0 && __atomic_load_n(&s->consumed, __ATOMIC_ACQUIRE) >= s->head) {
      drained = static_cast<int>(i);
    }
    if (s->start_ticks < oldest_start) {
      oldest_start = s->start_ticks;
      oldest = static_cast<int>(i);
    }
  }
  if (drained >= 0) return drained;
  if (oldest >= 0 && !consumer_alive(h)) {
    abi::ThreadSlot* s = rt.segment.slot(static_cast<uint32_t>(oldest));
    uint64_t unread = s->written - __atomic_load_n(&s->consumed_records, __ATOMIC_ACQUIRE);
    __atomic_fetch_add(&h->lost_reclaimed, unread, __ATOMIC_RELAXED);
    return oldest;
  }
  return -1;
}

}  // namespace

bool claim_ring_for_this_thread() {
  Runtime& rt = Runtime::instance();
  std::lock_guard lock(rt.mu);
  if (!rt.started) return false;
  int index = pick_slot_locked(rt);
  if (index < 0) return false;
  auto i = static_cast<uint32_t>(index);
  abi::SegmentHeader* h = rt.segment.header();
  uint64_t ring_off = h->rings_offset + uint64_t{i} * h->ring_size;
  if (posix_fallocate(rt.segment.fd, static_cast<off_t>(ring_off), h->ring_size) != 0) {
    return false;  // /dev/shm is full: better no ring than a SIGBUS later
  }
  abi::ThreadSlot* s = rt.segment.slot(i);
  // Readers detect reuse through the generation, bumped before anything else changes.
  __atomic_store_n(&s->generation, s->generation + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&s->head, 0, __ATOMIC_RELEASE);
  s->written = 0;
  s->dropped = 0;
  s->tid = static_cast<uint32_t>(gettid());
  s->writer_waiting = 0;
  s->start_ticks = detail::now_ticks();
  std::memset(s->name, 0, sizeof(s->name));
  pthread_getname_np(pthread_self(), s->name, sizeof(s->name));
  __atomic_store_n(&s->consumed, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&s->consumed_records, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&s->state, static_cast<uint32_t>(SlotState::kActive), __ATOMIC_RELEASE);
  rt.any_ring_claimed = true;
  detail::t_writer = detail::Writer{rt.segment.ring(i), h->ring_size - 1u, 0, s};
  pthread_setspecific(rt.exit_key, s);
  return true;
}

}  // namespace nanotrace::runtime

namespace nanotrace::detail {

uint64_t reserve_slow(uint32_t bytes) noexcept {
  runtime::Runtime& rt = runtime::Runtime::instance();
  Writer& w = t_writer;
  if (w.data == nullptr && !runtime::claim_ring_for_this_thread()) {
    if (rt.started) {
      __atomic_fetch_add(&rt.segment.header()->lost_no_slot, 1, __ATOMIC_RELAXED);
    }
    return kNoSpace;
  }
  abi::SegmentHeader* h = rt.segment.header();
  abi::ThreadSlot* s = w.slot;
  const uint64_t block = h->block_size;
  uint64_t head = s->head;
  uint64_t in_block = head & (block - 1);
  if (in_block != 0 && in_block + bytes <= block) {
    w.check = head - in_block + block;
    return head;
  }
  uint64_t next = in_block == 0 ? head : head - in_block + block;
  if (in_block != 0) {
    // End marker: a zero word stops a reader before stale bytes of an older lap.
    *reinterpret_cast<uint64_t*>(w.data + (head & w.mask)) = 0;
  }
  auto mode = static_cast<abi::Mode>(h->mode);
  if (mode != abi::Mode::kOverwrite) {
    // The whole next block must have been consumed before we may write into it.
    auto has_room = [&] {
      return __atomic_load_n(&s->consumed, __ATOMIC_ACQUIRE) + h->ring_size >= next + block;
    };
    while (!has_room()) {
      if (mode == abi::Mode::kDiscard || !runtime::consumer_alive(h)) {
        s->dropped = s->dropped + 1;
        w.check = 0;  // come back here for the next record
        return kNoSpace;
      }
      uint32_t seq = __atomic_load_n(&s->consumer_seq, __ATOMIC_ACQUIRE);
      __atomic_store_n(&s->writer_waiting, 1, __ATOMIC_SEQ_CST);
      if (has_room()) break;
      sys::futex_wait(&s->consumer_seq, seq, 20 * 1000 * 1000);
    }
    __atomic_store_n(&s->writer_waiting, 0, __ATOMIC_RELAXED);
  }
  auto* bh = reinterpret_cast<abi::BlockHeader*>(w.data + (next & w.mask));
  bh->position = next;
  bh->first_seq = s->written;
  bh->base_ticks = now_ticks();
  head = next + abi::kBlockHeaderBytes;
  // Publish the block start so a reader sees an empty block rather than a stale one.
  __atomic_store_n(&s->head, head, __ATOMIC_RELEASE);
  w.check = next + block;
  return head;
}

}  // namespace nanotrace::detail
