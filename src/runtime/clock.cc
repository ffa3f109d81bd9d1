// Clock source and calibration. Timestamps are raw TSC ticks when the TSC is invariant
// (constant rate, not stopped in idle states), else CLOCK_MONOTONIC nanoseconds. The segment
// keeps (ticks, realtime, monotonic) pairs so a reader converts ticks to wall-clock time; the
// control thread refreshes the latest pair so the rate is measured over a long baseline, and
// exit takes a last one. Nothing calibrates at start-up: the rate comes from these pairs.
#include "base/clock.hpp"

#include <x86intrin.h>

#include <cstdint>

#include "nanotrace/nanotrace.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::detail {

constinit bool g_clock_is_tsc = true;

uint64_t monotonic_ticks() noexcept { return sys::monotonic_ns(); }

}  // namespace nanotrace::detail

namespace nanotrace::runtime {
namespace {

uint64_t read_ticks(abi::ClockKind kind) {
  return kind == abi::ClockKind::kTsc ? __rdtsc() : detail::monotonic_ticks();
}

}  // namespace

// The pair with the tightest tick bracket of a few tries, so a preemption between the two
// reads does not skew it.
abi::ClockPair sample_clock_pair(abi::ClockKind kind) {
  abi::ClockPair best{};
  uint64_t best_span = ~uint64_t{0};
  for (int i = 0; i < 5; ++i) {
    uint64_t t0 = read_ticks(kind);
    uint64_t real = sys::realtime_ns();
    uint64_t mono = sys::monotonic_ns();
    uint64_t t1 = read_ticks(kind);
    if (t1 - t0 < best_span) {
      best_span = t1 - t0;
      best = {t0 + (t1 - t0) / 2, real, mono};
    }
  }
  return best;
}

uint64_t ticks_per_second_now(abi::SegmentHeader* h) {
  if (uint64_t hz = __atomic_load_n(&h->ticks_per_second, __ATOMIC_RELAXED); hz != 0) return hz;
  auto kind = static_cast<abi::ClockKind>(h->clock_kind);
  if (kind == abi::ClockKind::kMonotonic) return 1000000000ull;
  // No estimate yet (the process is young): measure against the start pair, 1 ms apart at
  // least (1e-4 or better, given pairs bracketed to tens of nanoseconds).
  abi::ClockPair now;
  do {
    now = sample_clock_pair(kind);
  } while (now.monotonic_ns < h->clock_start.monotonic_ns + 1000000);
  return static_cast<uint64_t>(static_cast<double>(now.ticks - h->clock_start.ticks) * 1e9 /
                               static_cast<double>(now.monotonic_ns - h->clock_start.monotonic_ns));
}

void refresh_clock(abi::SegmentHeader* h) {
  auto kind = static_cast<abi::ClockKind>(h->clock_kind);
  abi::ClockPair p = sample_clock_pair(kind);
  uint32_t seq = __atomic_load_n(&h->clock_seq, __ATOMIC_RELAXED);
  __atomic_store_n(&h->clock_seq, seq + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  h->clock_latest = p;
  uint64_t dt = p.monotonic_ns - h->clock_start.monotonic_ns;
  if (kind == abi::ClockKind::kTsc && dt > 1000000) {  // the longest baseline is the best
    __atomic_store_n(&h->ticks_per_second,
                     static_cast<uint64_t>(static_cast<double>(p.ticks - h->clock_start.ticks) *
                                           1e9 / static_cast<double>(dt)),
                     __ATOMIC_RELAXED);
  }
  __atomic_store_n(&h->clock_seq, seq + 2, __ATOMIC_RELEASE);
}

}  // namespace nanotrace::runtime
