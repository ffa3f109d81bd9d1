// How long the recording loop (recording_loop.hpp) rests between its passes over the rings.
// Internal header.
#pragma once

#include <cstdint>

namespace nanotrace::rec {

// Straight on while a writer waits for room; after a pass that moved records, until the
// busiest ring is a quarter full again at the rate that pass saw (at most 10 ms); after an
// empty pass, a back-off from 50 us doubling up to 10 ms.
class DrainPacing {
 public:
  explicit DrainPacing(double start_s) : prev_pass_(start_s) {}

  // A pass begins at `now_s`: returns the seconds since the previous one began, the time in
  // which what this pass moves arrived.
  double begin_pass(double now_s) {
    const double interval = now_s - prev_pass_;
    prev_pass_ = now_s;
    return interval;
  }

  // Microseconds to rest after a pass. `quarter_s`: the seconds the busiest ring takes to fill
  // a quarter (used when the pass moved records); `elapsed_s`: how long the pass itself took.
  uint64_t rest_us(bool moved, bool writer_waiting, double quarter_s, double elapsed_s) {
    if (moved) {
      idle_us_ = kFirstIdleUs;
      if (writer_waiting) return 0;
      double wait = (quarter_s < kMaxRestS ? quarter_s : kMaxRestS) - elapsed_s;
      return wait >= 20e-6 ? static_cast<uint64_t>(wait * 1e6) : 0;
    }
    const uint64_t rest = idle_us_;
    idle_us_ = idle_us_ * 2 > kMaxIdleUs ? kMaxIdleUs : idle_us_ * 2;
    return rest;
  }

 private:
  static constexpr uint64_t kFirstIdleUs = 50;
  static constexpr uint64_t kMaxIdleUs = 10000;
  static constexpr double kMaxRestS = 0.01;
  double prev_pass_;
  uint64_t idle_us_ = kFirstIdleUs;
};

}  // namespace nanotrace::rec
