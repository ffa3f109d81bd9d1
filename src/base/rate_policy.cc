// The rate policy (rate_policy.hpp).
#include "base/rate_policy.hpp"

#include <algorithm>

namespace nanotrace {
namespace {

// now - since, 0 if the caller's clock went back.
uint64_t elapsed(uint64_t now_ns, uint64_t since_ns) {
  return now_ns > since_ns ? now_ns - since_ns : 0;
}

}  // namespace

bool RatePolicy::capped_at(uint64_t now_ns) const {
  if (limits_.interval_ns == 0 || limits_.max_per_interval == 0 || !open_) return false;
  if (elapsed(now_ns, interval_start_ns_) >= limits_.interval_ns) return false;  // it ended
  return in_interval_ >= limits_.max_per_interval;
}

bool RatePolicy::cooling_at(uint64_t now_ns) const {
  return limits_.cooldown_ns != 0 && any_ && elapsed(now_ns, last_ns_) < limits_.cooldown_ns;
}

void RatePolicy::admit(uint64_t now_ns) {
  const bool ended = !open_ || elapsed(now_ns, interval_start_ns_) >= limits_.interval_ns;
  if (ended) {
    open_ = true;
    interval_start_ns_ = now_ns;
    in_interval_ = 0;
  }
  ++in_interval_;
  any_ = true;
  last_ns_ = now_ns;
  ++counts_.admitted;
}

RatePolicy::Verdict RatePolicy::peek(uint64_t now_ns) const {
  if (cooling_at(now_ns)) return Verdict::kCoolingDown;
  if (capped_at(now_ns)) return Verdict::kCapped;
  return Verdict::kAdmitted;
}

RatePolicy::Verdict RatePolicy::offer(uint64_t now_ns) {
  Verdict v = peek(now_ns);
  switch (v) {
    case Verdict::kAdmitted:
      admit(now_ns);
      break;
    case Verdict::kCapped:
      ++counts_.capped;
      break;
    case Verdict::kCoolingDown:
      ++counts_.cooling_down;
      break;
  }
  return v;
}

void RatePolicy::force(uint64_t now_ns) {
  if (capped_at(now_ns)) open_ = false;  // a new interval opens with it
  admit(now_ns);
  ++counts_.forced;
}

uint64_t RatePolicy::next_admit_ns(uint64_t now_ns) const {
  uint64_t at = now_ns;
  if (cooling_at(now_ns)) at = std::max(at, last_ns_ + limits_.cooldown_ns);
  if (capped_at(now_ns)) at = std::max(at, interval_start_ns_ + limits_.interval_ns);
  return at;
}

}  // namespace nanotrace
