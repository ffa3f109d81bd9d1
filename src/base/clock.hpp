// The system clocks as every layer reads them: CLOCK_MONOTONIC and CLOCK_REALTIME in
// nanoseconds since their epoch (or seconds). Inline, so that the runtime's fallback clock and
// the timing brackets around a TSC read cost no call; the runtime's records use its own clock
// (nanotrace.hpp), not these.
#pragma once

#include <time.h>

#include <cstdint>

namespace nanotrace::sys {

inline uint64_t clock_ns(clockid_t id) noexcept {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
inline uint64_t monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }
inline uint64_t realtime_ns() noexcept { return clock_ns(CLOCK_REALTIME); }
// CLOCK_MONOTONIC in seconds: the recorders' pacing and deadlines.
inline double monotonic_seconds() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace nanotrace::sys
