// How often something may happen (a fleet freeze, a trigger's fire): at most `max_per_interval`
// times per interval, and never sooner than `cooldown_ns` after the last time it did. What is
// held back is counted, by reason, so that nothing is dropped silently.
//
// An interval opens with the first event admitted once the previous one has ended (it is
// anchored at that event, not at a wall-clock boundary) and lasts `interval_ns`. The policy
// reads no clock: every call is given `now_ns` by its caller (CLOCK_MONOTONIC in the agent,
// any never-decreasing nanosecond count in a test), so a test drives it with whatever times it
// wants and the verdict depends on those alone.
//
// Used by the fleet agent (at most one fleet freeze per `--rate` interval) and by the duration
// triggers' per-trigger caps. Thread safety: none; the owner locks.
#pragma once

#include <cstdint>

namespace nanotrace {

struct RateLimits {
  uint32_t max_per_interval = 1;  // events admitted per interval (0: no cap)
  uint64_t interval_ns = 0;       // the interval's length (0: no cap)
  uint64_t cooldown_ns = 0;       // the least time between two admitted events (0: none)
};

class RatePolicy {
 public:
  enum class Verdict : uint8_t {
    kAdmitted,     // it happens
    kCapped,       // the interval's cap is reached: held back
    kCoolingDown,  // too soon after the last admitted event: held back
  };
  struct Counts {
    uint64_t admitted = 0;      // by offer(), forced ones included
    uint64_t forced = 0;        // by force()
    uint64_t capped = 0;        // held back by the cap
    uint64_t cooling_down = 0;  // held back by the cool-down
    uint64_t held_back() const { return capped + cooling_down; }
  };

  explicit RatePolicy(const RateLimits& limits = {}) : limits_(limits) {}

  // An event at now_ns: admitted (and counted toward the cap, the cool-down starting) or held
  // back (and counted).
  Verdict offer(uint64_t now_ns);
  // An event that happens whatever the limits (one asked for by an operator): it counts as
  // admitted; if the interval's cap is reached already, a new interval opens with it, so
  // what follows is held back as after any admitted event.
  void force(uint64_t now_ns);
  // What offer(now_ns) would say, without counting anything.
  Verdict peek(uint64_t now_ns) const;
  // The earliest time >= now_ns at which an event would be admitted.
  uint64_t next_admit_ns(uint64_t now_ns) const;

  // New limits; the current interval and the last admitted event stay (a shorter interval may
  // end the current one at once).
  void set_limits(const RateLimits& limits) { limits_ = limits; }
  const RateLimits& limits() const { return limits_; }
  const Counts& counts() const { return counts_; }

 private:
  bool capped_at(uint64_t now_ns) const;
  bool cooling_at(uint64_t now_ns) const;
  void admit(uint64_t now_ns);

  RateLimits limits_;
  Counts counts_;
  bool open_ = false;  // an interval was opened (interval_start_ns_ is valid)
  uint64_t interval_start_ns_ = 0;
  uint32_t in_interval_ = 0;  // admitted in the current interval
  bool any_ = false;          // an event was admitted (last_ns_ is valid)
  uint64_t last_ns_ = 0;      // the last admitted event
};

}  // namespace nanotrace
