// A node's traced processes, watched through futex_waitv (local_processes.hpp).
#include "fleet/local_processes.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <climits>

#include "base/clock.hpp"
#include "base/process.hpp"
#include "reader/thread_stream.hpp"
#include "reader/trace_internals.hpp"

#ifndef __NR_futex_waitv
#define __NR_futex_waitv 449
#endif

namespace nanotrace::fleet {
namespace {

constexpr uint32_t kFutexSize32 = 0x02;  // FUTEX2_SIZE_U32
constexpr uint32_t kFutexPrivate = 128;  // FUTEX2_PRIVATE
constexpr size_t kMaxWaiters = 128;      // the kernel's limit for one futex_waitv

struct WaitEntry {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
};

bool writer_alive(const Controller& control) {
  Trace& t = const_cast<Controller&>(control).trace();
  return sys::segment_byte_locked(reader::TraceInternals::fd(t), sys::kWriterLockByte);
}

// The clock value at which the oldest block that slot's ring still holds began, or 0 if it
// cannot be read consistently (the writer reached that block while we read it, or the slot
// was claimed again).
uint64_t oldest_block_ticks(const uint8_t* base, const RingLayout& l, uint32_t index,
                            const abi::ThreadSlot* slot, uint64_t head, uint32_t generation) {
  auto safe_from = [&](uint64_t h) {
    uint64_t consumed = __atomic_load_n(&slot->consumed, __ATOMIC_RELAXED);
    return reader::oldest_safe_block(l.mode, /*writer_gone=*/false, h, consumed, l.block_size,
                                     l.ring_size);
  };
  const uint64_t pos = safe_from(head);
  if (pos + abi::kBlockHeaderBytes > head) return 0;
  const uint64_t offset =
      l.rings_offset + uint64_t{index} * l.ring_size + (pos & (l.ring_size - 1));
  const auto* block = reinterpret_cast<const abi::BlockHeader*>(base + offset);
  const uint64_t position = __atomic_load_n(&block->position, __ATOMIC_ACQUIRE);
  const uint64_t ticks = __atomic_load_n(&block->base_ticks, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  // Still the same lap of the same thread, and still out of the writer's reach: the header
  // read is the block's.
  if (position != pos || __atomic_load_n(&slot->generation, __ATOMIC_RELAXED) != generation ||
      safe_from(__atomic_load_n(&slot->head, __ATOMIC_ACQUIRE)) > pos) {
    return 0;
  }
  return ticks;
}

uint64_t now_ticks(abi::ClockKind kind) {
  if (kind == abi::ClockKind::kTsc) return __rdtsc();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

RingLayout ring_layout(Controller& control) {
  RingLayout l;
  const ProcessInfo& p = control.process();
  const auto* hdr =
      reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(control.trace()));
  l.threads_offset = __atomic_load_n(&hdr->threads_offset, __ATOMIC_RELAXED);
  l.rings_offset = __atomic_load_n(&hdr->rings_offset, __ATOMIC_RELAXED);
  l.ring_size = p.ring_size;
  l.block_size = p.block_size;
  l.mode = p.mode;
  l.clock = p.clock;
  const bool pow2 = l.ring_size != 0 && (l.ring_size & (l.ring_size - 1)) == 0 &&
                    l.block_size >= abi::kBlockHeaderBytes &&
                    (l.block_size & (l.block_size - 1)) == 0 && l.block_size <= l.ring_size;
  if (!pow2) return l;  // slots 0: nothing is read
  uint64_t slots = std::min<uint64_t>(p.max_threads, 65536);
  const uint64_t size = p.segment_size;
  if (l.threads_offset > size) return l;
  slots = std::min<uint64_t>(slots, (size - l.threads_offset) / sizeof(abi::ThreadSlot));
  if (l.rings_offset > size) return l;
  slots = std::min<uint64_t>(slots, (size - l.rings_offset) / l.ring_size);
  l.slots = static_cast<uint32_t>(slots);
  return l;
}

}  // namespace

RingHealth ring_health(const LocalProcess& process, uint64_t at_ticks) {
  RingHealth h;
  const RingLayout& l = process.layout;
  Trace& t = process.control->trace();
  // Straight from the mapping (no re-read of the tables): the metrics thread calls this.
  const uint8_t* base = reader::TraceInternals::base(t);
  const auto* hdr = reinterpret_cast<const abi::SegmentHeader*>(base);
  h.lost_no_slot = __atomic_load_n(&hdr->lost_no_slot, __ATOMIC_RELAXED);
  h.lost_reclaimed = __atomic_load_n(&hdr->lost_reclaimed, __ATOMIC_RELAXED);
  const uint64_t rate = __atomic_load_n(&hdr->ticks_per_second, __ATOMIC_RELAXED);
  const double hz = rate > 0 ? static_cast<double>(rate) : 1e9;
  const uint64_t now = at_ticks != 0 ? at_ticks : now_ticks(l.clock);
  double oldest_start = 0;  // the longest-lived thread's age, seconds
  double covered = -1;      // the least span a written-over ring covers (-1: none)
  for (uint32_t i = 0; i < l.slots; ++i) {
    const auto* slot = reinterpret_cast<const abi::ThreadSlot*>(
        base + l.threads_offset + static_cast<uint64_t>(i) * sizeof(abi::ThreadSlot));
    uint32_t state = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
    if (state != static_cast<uint32_t>(abi::SlotState::kActive) &&
        state != static_cast<uint32_t>(abi::SlotState::kExited)) {
      continue;
    }
    const uint32_t generation = __atomic_load_n(&slot->generation, __ATOMIC_ACQUIRE);
    const uint64_t start = __atomic_load_n(&slot->start_ticks, __ATOMIC_RELAXED);
    const uint64_t head = __atomic_load_n(&slot->head, __ATOMIC_ACQUIRE);
    ++h.threads;
    h.records += __atomic_load_n(&slot->written, __ATOMIC_RELAXED);
    h.dropped += __atomic_load_n(&slot->dropped, __ATOMIC_RELAXED);
    if (head > l.ring_size) h.overwritten_bytes += head - l.ring_size;
    if (start == 0 || now <= start || head == 0) continue;
    const double lifetime = static_cast<double>(now - start) / hz;
    if (head <= l.ring_size) {  // never written over: it holds all its thread wrote
      oldest_start = std::max(oldest_start, lifetime);
      continue;
    }
    ++h.wrapped_threads;
    uint64_t from = oldest_block_ticks(base, l, i, slot, head, generation);
    // The writer passed the block as we read it: a block later, it is the oldest again.
    if (from == 0)
      from = oldest_block_ticks(base, l, i, slot, __atomic_load_n(&slot->head, __ATOMIC_ACQUIRE),
                                generation);
    // Still racing (or a block stamped after now): its fill rate's estimate.
    double span = from != 0 && from < now
                      ? static_cast<double>(now - from) / hz
                      : lifetime * static_cast<double>(l.ring_size) / static_cast<double>(head);
    covered = covered < 0 ? span : std::min(covered, span);
  }
  h.history_seconds = covered >= 0 ? covered : oldest_start;
  return h;
}

Result<std::unique_ptr<LocalProcess>> attach_process(const std::string& segment) {
  auto control = Controller::attach(segment);
  if (!control.ok()) return control.status();
  auto p = std::make_unique<LocalProcess>();
  p->pid = (*control)->process().pid;
  p->name = (*control)->process().user_name.empty() ? (*control)->process().process_name
                                                    : (*control)->process().user_name;
  p->segment = segment;
  p->control = std::move(*control);
  p->layout = ring_layout(*p->control);
  p->seen = p->control->trigger_state();
  return p;
}

LocalProcesses::LocalProcesses() = default;

std::vector<uint32_t> LocalProcesses::scan(std::vector<std::unique_ptr<LocalProcess>>* gone) {
  std::lock_guard lock(mu_);
  // Gone: its writer lock is free (it exited or died), and the agent has seen its last
  // trigger state (a process that fired and exited at once is dropped a scan later, once the
  // agent has taken its firing).
  auto first_gone = std::stable_partition(
      processes_.begin(), processes_.end(), [](const std::unique_ptr<LocalProcess>& p) {
        return writer_alive(*p->control) || p->control->trigger_state() != p->seen;
      });
  if (gone != nullptr) {
    for (auto it = first_gone; it != processes_.end(); ++it) gone->push_back(std::move(*it));
  }
  processes_.erase(first_gone, processes_.end());
  std::vector<uint32_t> added;
  for (const sys::SegmentName& segment : sys::list_segment_names()) {
    bool known = std::any_of(processes_.begin(), processes_.end(),
                             [&](const auto& p) { return p->segment == segment.path; });
    if (known) continue;
    auto p = attach_process(segment.path);
    if (!p.ok()) continue;  // a dead process's segment, or one being created
    added.push_back((*p)->pid);
    processes_.push_back(std::move(*p));
  }
  return added;
}

void LocalProcesses::wait(int timeout_ms) {
  WaitEntry entries[kMaxWaiters];
  size_t n = 0;
  entries[n++] = {kick_.load(std::memory_order_acquire), reinterpret_cast<uint64_t>(&kick_),
                  kFutexSize32 | kFutexPrivate, 0};
  bool polled = false;
  for (const auto& p : processes_) {
    if (n == kMaxWaiters) {
      polled = true;  // past the kernel's limit: the rest are looked at every 5 ms
      break;
    }
    entries[n++] = {static_cast<uint32_t>(p->seen),
                    reinterpret_cast<uint64_t>(p->control->trigger_state_word()), kFutexSize32, 0};
  }
  if (polled) timeout_ms = std::min(timeout_ms, 5);
  timespec deadline{};
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += static_cast<long>(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  syscall(__NR_futex_waitv, entries, static_cast<unsigned>(n), 0, &deadline, CLOCK_MONOTONIC);
}

void LocalProcesses::kick() {
  kick_.fetch_add(1, std::memory_order_acq_rel);
  syscall(SYS_futex, &kick_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

size_t LocalProcesses::freeze_all(const LocalProcess* except, std::vector<std::string>* errors,
                                  uint64_t* requested_ns) {
  std::vector<std::pair<LocalProcess*, uint32_t>> posted;
  size_t frozen = 0;
  auto count = [&frozen](LocalProcess& p) {
    p.frozen_by_agent = true;
    p.seen = p.control->trigger_state();
    ++p.freezes;
    ++frozen;
  };
  for (const auto& p : processes_) {
    if (p.get() == except) continue;
    // Frozen already by a signal (signal_freeze_all): no request, no wake-up of the process.
    if (p->control->trigger_state() == abi::TriggerState::kFrozen) {
      count(*p);
      continue;
    }
    auto seq = p->control->post_freeze();
    if (!seq.ok()) {
      errors->push_back("process " + std::to_string(p->pid) + ": " + seq.status().message());
      continue;
    }
    posted.emplace_back(p.get(), *seq);
  }
  if (requested_ns != nullptr) {
    *requested_ns = sys::realtime_ns();
  }
  for (auto& [p, seq] : posted) {
    Status s = p->control->await_answer(seq);
    if (!s.ok()) {
      errors->push_back("process " + std::to_string(p->pid) + ": " + s.message());
      continue;
    }
    count(*p);
  }
  return frozen;
}

size_t LocalProcesses::signal_freeze_all(const LocalProcess* except) {
  std::lock_guard lock(mu_);
  size_t signalled = 0;
  for (const auto& p : processes_) {
    if (p.get() != except && p->control->signal_freeze().ok()) ++signalled;
  }
  return signalled;
}

void LocalProcesses::resume_all(std::vector<std::string>* errors) {
  for (const auto& p : processes_) {
    abi::TriggerState s = p->control->trigger_state();
    if (s != abi::TriggerState::kFrozen && s != abi::TriggerState::kFired) continue;
    Status r = p->control->resume();
    if (!r.ok()) errors->push_back("process " + std::to_string(p->pid) + ": " + r.message());
    p->frozen_by_agent = false;
    p->seen = p->control->trigger_state();
  }
}

}  // namespace nanotrace::fleet
