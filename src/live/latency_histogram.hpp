// A latency histogram of bounded size for a live view, which cannot keep every latency of a
// run that goes on for hours: log-linear buckets (64 per power of two, so a percentile read
// from it is within 1/64 of the exact value), the exact count and maximum.
//
// Thread safety: a value; one thread at a time.
#pragma once

#include <array>
#include <cstdint>

namespace nanotrace::live {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;  // 64 buckets per power of two
  static constexpr uint32_t kSub = 1u << kSubBits;
  // Values below kSub have a bucket each; then 64 per power of two up to 2^64.
  static constexpr uint32_t kBuckets = (64 - kSubBits + 1) * kSub;

  void add(uint64_t ns) {
    ++buckets_[bucket_of(ns)];
    ++count_;
    if (ns > max_) max_ = ns;
  }
  void merge(const LatencyHistogram& other);
  void clear();

  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  // The nearest-rank q-quantile (0 < q <= 1): the middle of the bucket holding it, at most
  // the maximum. 0 when empty.
  uint64_t quantile(double q) const;

  // Bucket index of a value, and the smallest value of a bucket (exposed for tests).
  static uint32_t bucket_of(uint64_t ns) {
    if (ns < kSub) return static_cast<uint32_t>(ns);
    const int top = 63 - __builtin_clzll(ns);  // >= kSubBits
    const uint64_t sub = (ns >> (top - kSubBits)) & (kSub - 1);
    return static_cast<uint32_t>((top - kSubBits + 1) * kSub + sub);
  }
  static uint64_t bucket_low(uint32_t bucket);

 private:
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

}  // namespace nanotrace::live
