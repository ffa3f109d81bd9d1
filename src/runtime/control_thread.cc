// The control thread of a traced process. It sleeps on the segment's control_seq futex word;
// a controller in another process (nanotrace enable/disable/arm) changes the group table or
// writes a trigger request, bumps control_seq and wakes it, and the thread applies the
// change to the call sites, whose enable flags live in process memory so the disabled check
// stays a single load. It ends a trigger's time window at its deadline (a process that writes
// nothing after the match still freezes on time). It also refreshes the clock pair the tick
// rate is measured from, and keeps the first blocks of free slots allocated ahead of need,
// then a few whole rings, so that a new thread's first event finds its memory ready (a
// claimer wakes it when few are left). It runs as SCHED_BATCH, so waking it never preempts
// the waker. It records no events.
//
// It must not keep the process alive: when every other thread has gone (the program's last
// thread left through pthread_exit), it ends the process with status 0, as the exit of that
// last thread would have.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/process.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/duration_runtime.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

constexpr uint32_t kPreparedRings = 2;  // free rings kept ready
// Free slots kept with at least their first block ready (a block is 64 KiB by default, a
// ring 1 MiB): a burst of new threads finds more of them, each allocated in a few
// microseconds rather than a few hundred.
constexpr uint32_t kFirstBlocks = 16;
// A claim asks for more when fewer free slots than this are ready.
constexpr int32_t kReadyLowWater = kFirstBlocks / 2;
constexpr size_t kStackBytes = 128u << 10;

// REQUIRES: mu held. Allocates one more first block if fewer than kFirstBlocks free slots
// have one, or else one more free ring if fewer than kPreparedRings are ready. One allocation
// per pass, so that a request waits for one at most. True if it allocated (there may be more
// to do); false once enough is ready, or when /dev/shm is full (claimers see that too).
// Nothing is made ready before a second ring was claimed: a program with one thread would
// only free that memory at exit (0.25-0.4 ms of exit here).
bool prepare_free_slots(Runtime& rt) {
  if (rt.rings_claimed.load(std::memory_order_relaxed) < kRingsBeforePreparing) return false;
  uint32_t rings = 0, first_blocks = 0;
  int64_t unprepared = -1, without_block = -1;
  // Past the scan limit every slot is untouched, free and unprepared: the one at the limit
  // stands for them all.
  const uint32_t limit = rt.slot_scan_limit();
  for (uint32_t i = 0; i < limit; ++i) {
    abi::ThreadSlot* s = rt.segment.slot(i);
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) !=
        static_cast<uint32_t>(abi::SlotState::kFree)) {
      continue;
    }
    if (__atomic_load_n(&s->prepared, __ATOMIC_ACQUIRE) != 0) {
      ++rings;
      ++first_blocks;
      continue;
    }
    if (unprepared < 0) unprepared = i;
    if (__atomic_load_n(&s->allocated_blocks, __ATOMIC_ACQUIRE) != 0) {
      ++first_blocks;
    } else if (without_block < 0) {
      without_block = i;
    }
  }
  // First blocks before whole rings: a thread that finds no first block ready allocates one
  // itself on its first event, and with a whole ring (1 MiB) being allocated meanwhile its
  // allocation waits for that one (one lock per file): 1,000 new threads had 110-150 first
  // events over 50 us that way, against about 10 in this order.
  bool prepared = false;
  if (first_blocks < kFirstBlocks && without_block >= 0) {
    rt.note_slot_used(static_cast<uint32_t>(without_block));
    prepared = prepare_first_block(rt.segment, static_cast<uint32_t>(without_block));
    if (prepared) ++first_blocks;
  } else if (rings < kPreparedRings && unprepared >= 0) {
    rt.note_slot_used(static_cast<uint32_t>(unprepared));
    // A slot that had no block before is one more ready. Read before preparing and atomically:
    // a writer may claim the slot and allocate blocks meanwhile.
    const bool had_no_block =
        __atomic_load_n(&rt.segment.slot(static_cast<uint32_t>(unprepared))->allocated_blocks,
                        __ATOMIC_ACQUIRE) == 0;
    prepared = prepare_ring(rt.segment, static_cast<uint32_t>(unprepared));
    if (prepared && had_no_block) ++first_blocks;
  }
  rt.ready_free_slots.store(static_cast<int32_t>(first_blocks), std::memory_order_relaxed);
  return prepared;
}

// REQUIRES: rt.mu held. Sends every writer through the slow path at least every
// kBlockRenewalNs (a quarter of a shorter NANOTRACE_BLOCK_MAX_AGE), where a block older than
// the limit is ended (ring_writer.cc): an idle thread's next record then starts a new block.
void renew_old_blocks(Runtime& rt, uint64_t* last_ns) {
  uint64_t period_ns = kBlockRenewalNs;
  if (const uint64_t max_age_ns = rt.config.block_max_age_ns; max_age_ns != 0) {
    const double ticks = static_cast<double>(max_age_ns) / 1e9 *
                         static_cast<double>(ticks_per_second_now(rt.segment.header()));
    rt.block_max_age_ticks.store(ticks < static_cast<double>(kBlockMaxAgeTicks)
                                     ? static_cast<uint64_t>(ticks)
                                     : kBlockMaxAgeTicks,
                                 std::memory_order_relaxed);
    period_ns = std::min(period_ns, max_age_ns / 4);
  }
  const uint64_t now_ns = sys::monotonic_ns();
  if (now_ns - *last_ns < period_ns) return;
  *last_ns = now_ns;
  zero_every_check(rt);
}

void* control_loop(void*) {
  pthread_setname_np(pthread_self(), "nanotrace-ctl");
  // SCHED_BATCH: its fair share of the CPU, but its wake-ups never preempt the program's
  // threads. A claim that wakes it had the claiming thread switched out for the whole
  // preparation that followed: first events of 1-1.5 ms, 0.2-0.26 ms at most since.
  sched_param batch{};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch);
  detail::t_runtime_io = true;  // its /proc reads are not the program's I/O
  Runtime& rt = Runtime::instance();
  int wakeups = 0;
  uint64_t last_renewal_ns = sys::monotonic_ns();
  bool more = false;
  uint64_t duration_wait_ns = kNoDurationWork;
  for (;;) {
    uint32_t* word;
    uint32_t seen;
    uint64_t window_left_ns;  // until a running time window's deadline (0: none)
    {
      std::lock_guard lock(rt.mu);
      if (rt.control_stop.load(std::memory_order_acquire) ||
          !rt.started.load(std::memory_order_acquire)) {
        return nullptr;
      }
      abi::SegmentHeader* h = rt.segment.header();
      word = &h->control_seq;
      // Ring memory is allocated through the descriptor: ours again before a claim needs it.
      reclaim_segment_fd(&rt.segment);
      seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
      rt.process_trigger_request_locked();
      // A freeze signalled without a request (a fleet agent's, from any of its threads).
      rt.process_freeze_request_locked();
      // Ages a duration trigger's operations; may fire on a stuck one, which may open a time
      // window: before the window's deadline is looked at.
      duration_wait_ns = duration_control_pass(rt);
      window_left_ns = rt.end_time_window_locked();
      rt.apply_groups_locked();
      // Not in the first 10 ms: a short-lived program should not pay for rings it never uses
      // (nor wait at exit for their allocation).
      more = wakeups > 0 && prepare_free_slots(rt);
      refresh_clock(h);
      renew_old_blocks(rt, &last_renewal_ns);
    }
    // Catching up with a burst of new threads: more slots before the periodic work again
    // (the lock is let go between them, for a fork or a module being loaded).
    for (int i = 0; more && i < static_cast<int>(kFirstBlocks); ++i) {
      std::lock_guard lock(rt.mu);
      if (rt.control_stop.load(std::memory_order_acquire) ||
          !rt.started.load(std::memory_order_acquire)) {
        return nullptr;
      }
      more = prepare_free_slots(rt);
      // A window's deadline may pass while rings are being prepared.
      window_left_ns = rt.end_time_window_locked();
    }
    SelfStat::Reading stat;
    if (rt.self_stat.read(&stat) && SelfStat::only_caller_left(stat)) {
      std::exit(0);  // the program's last thread is gone
    }
    // Frequent clock pairs early (the rate estimate converges), then ten times a second; at a
    // time window's deadline or a duration trigger's next aging if one comes first.
    long wait_ns = more ? 0 : wakeups < 20 ? 10 * 1000 * 1000 : 100 * 1000 * 1000;
    const uint64_t due_ns =
        std::min(window_left_ns != 0 ? window_left_ns : kNoDurationWork, duration_wait_ns);
    if (wait_ns != 0 && due_ns < static_cast<uint64_t>(wait_ns)) {
      wait_ns = static_cast<long>(due_ns);
    }
    if (wait_ns != 0) sys::futex_wait(word, seen, wait_ns);
    ++wakeups;
  }
}

}  // namespace

void Runtime::wake_control_thread() {
  abi::SegmentHeader* h = segment.header();
  __atomic_fetch_add(&h->control_seq, 1, __ATOMIC_RELEASE);
  sys::futex_wake_all(&h->control_seq);
}

void Runtime::took_ready_slot() {
  if (ready_free_slots.fetch_sub(1, std::memory_order_relaxed) - 1 < kReadyLowWater) {
    request_ring_preparation();
  }
}

void Runtime::start_control_thread() {
  if (control_thread_running) return;
  control_stop.store(false, std::memory_order_relaxed);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  // Signals stay with the application's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  control_thread_running = pthread_create(&control_thread, &attr, control_loop, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
}

void Runtime::stop_control_thread(bool wait) {
  pthread_t thread;
  {
    std::lock_guard lock(mu);
    if (!control_thread_running || pthread_equal(control_thread, pthread_self())) return;
    control_thread_running = false;
    thread = control_thread;
    control_stop.store(true, std::memory_order_release);
    // Without a wait (the process is ending) the thread is left asleep: woken, it would only
    // take the lock that the exit handler needs next, and the process ends it anyway.
    if (wait && started.load(std::memory_order_acquire)) {
      abi::SegmentHeader* h = segment.header();
      __atomic_fetch_add(&h->control_seq, 1, __ATOMIC_RELEASE);
      sys::futex_wake_all(&h->control_seq);
    }
  }
  if (wait) {
    pthread_join(thread, nullptr);
    self_stat.close_if_ours();
  } else {
    pthread_detach(thread);  // it ends by itself, or with the process
  }
}

}  // namespace nanotrace::runtime
