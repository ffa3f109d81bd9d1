// LatencyHistogram: merging, clearing and reading quantiles.
#include "live/latency_histogram.hpp"

#include <cmath>

namespace nanotrace::live {

uint64_t LatencyHistogram::bucket_low(uint32_t bucket) {
  if (bucket < kSub) return bucket;
  const uint32_t octave = bucket / kSub;  // >= 1
  const uint64_t sub = bucket % kSub;
  const int top = static_cast<int>(octave) + kSubBits - 1;
  return (uint64_t{1} << top) | (sub << (top - kSubBits));
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (uint32_t i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  if (other.max_ > max_) max_ = other.max_;
}

void LatencyHistogram::clear() {
  if (count_ == 0) return;
  buckets_.fill(0);
  count_ = 0;
  max_ = 0;
}

uint64_t LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  // Nearest rank: the smallest value with at least q of the count at or below it.
  auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  if (rank < 1) rank = 1;
  if (rank >= count_) return max_;  // the largest value is known exactly
  uint64_t seen = 0;
  for (uint32_t i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen < rank) continue;
    const uint64_t low = bucket_low(i);
    const uint64_t high = i + 1 < kBuckets ? bucket_low(i + 1) : ~uint64_t{0};
    const uint64_t mid = low + (high - low) / 2;
    return mid < max_ ? mid : max_;
  }
  return max_;
}

}  // namespace nanotrace::live
