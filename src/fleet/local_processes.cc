// A node's traced processes, watched through futex_waitv (local_processes.hpp).
#include "fleet/local_processes.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "base/clock.hpp"
#include "base/process.hpp"
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

}  // namespace

RingHealth ring_health(const Controller& control) {
  RingHealth h;
  Trace& t = const_cast<Controller&>(control).trace();
  // Straight from the mapping (no re-read of the tables): the metrics thread calls this.
  const uint8_t* base = reader::TraceInternals::base(t);
  const auto* hdr = reinterpret_cast<const abi::SegmentHeader*>(base);
  h.lost_no_slot = __atomic_load_n(&hdr->lost_no_slot, __ATOMIC_RELAXED);
  h.lost_reclaimed = __atomic_load_n(&hdr->lost_reclaimed, __ATOMIC_RELAXED);
  const uint64_t now = __atomic_load_n(&hdr->clock_latest.ticks, __ATOMIC_RELAXED);
  const uint64_t rate = __atomic_load_n(&hdr->ticks_per_second, __ATOMIC_RELAXED);
  const double hz = rate > 0 ? static_cast<double>(rate) : 1e9;
  const uint64_t ring = hdr->ring_size;
  const uint32_t slots = std::min<uint32_t>(hdr->max_threads, 65536);
  for (uint32_t i = 0; i < slots; ++i) {
    const auto* slot = reinterpret_cast<const abi::ThreadSlot*>(
        base + hdr->threads_offset + static_cast<uint64_t>(i) * sizeof(abi::ThreadSlot));
    uint32_t state = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
    if (state == static_cast<uint32_t>(abi::SlotState::kFree)) continue;
    uint64_t start = __atomic_load_n(&slot->start_ticks, __ATOMIC_RELAXED);
    uint64_t head = __atomic_load_n(&slot->head, __ATOMIC_RELAXED);
    ++h.threads;
    h.records += __atomic_load_n(&slot->written, __ATOMIC_RELAXED);
    h.dropped += __atomic_load_n(&slot->dropped, __ATOMIC_RELAXED);
    if (head > ring) h.overwritten_bytes += head - ring;
    if (start == 0 || now <= start || head == 0) continue;
    // The slot's lifetime, scaled by the share of what it wrote that its ring still holds.
    double lifetime = static_cast<double>(now - start) / hz;
    double held =
        head <= ring ? lifetime : lifetime * static_cast<double>(ring) / static_cast<double>(head);
    h.history_seconds = std::max(h.history_seconds, held);
  }
  return h;
}

LocalProcesses::LocalProcesses() = default;

std::vector<uint32_t> LocalProcesses::scan() {
  std::lock_guard lock(mu_);
  // Gone: its writer lock is free (it exited or died).
  processes_.erase(std::remove_if(processes_.begin(), processes_.end(),
                                  [](const std::unique_ptr<LocalProcess>& p) {
                                    return !writer_alive(*p->control);
                                  }),
                   processes_.end());
  std::vector<uint32_t> added;
  for (const sys::SegmentName& segment : sys::list_segment_names()) {
    bool known = std::any_of(processes_.begin(), processes_.end(),
                             [&](const auto& p) { return p->segment == segment.path; });
    if (known) continue;
    auto control = Controller::attach(segment.path);
    if (!control.ok()) continue;  // a dead process's segment, or one being created
    auto p = std::make_unique<LocalProcess>();
    p->pid = (*control)->process().pid;
    p->name = (*control)->process().user_name.empty() ? (*control)->process().process_name
                                                      : (*control)->process().user_name;
    p->segment = segment.path;
    p->control = std::move(*control);
    p->seen = p->control->trigger_state();
    added.push_back(p->pid);
    processes_.push_back(std::move(p));
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
