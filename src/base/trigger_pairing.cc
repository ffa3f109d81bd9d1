// The pairing behind duration triggers (see trigger_pairing.hpp).
#include "base/trigger_pairing.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

namespace nanotrace::pairing {
namespace {

// How long a thread waits for an entry another thread holds (a few stores, unless that
// thread was descheduled) before it gives up on it.
constexpr int kHeldSpins = 256;

void pause() { __builtin_ia32_pause(); }

}  // namespace

OpenTable::OpenTable(size_t capacity) {
  size_t buckets = 16;
  while (buckets * kWays < capacity && buckets < (size_t{1} << 30)) buckets *= 2;
  void* p = mmap(nullptr, buckets * sizeof(Bucket), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  buckets_ = static_cast<Bucket*>(p);
  bucket_count_ = buckets;
}

OpenTable::~OpenTable() {
  if (buckets_ != nullptr) munmap(buckets_, bytes());
}

void OpenTable::clear() {
  if (buckets_ != nullptr) std::memset(static_cast<void*>(buckets_), 0, bytes());
}

void OpenTable::release_pages() {
  if (buckets_ != nullptr) madvise(buckets_, bytes(), MADV_DONTNEED);
}

OpenTable::Begin OpenTable::begin(const OpenOp& op, OpenOp* dropped) {
  // Keys that count up (request numbers, the common case) take each bucket in turn, one
  // every four begins, and find it out of cache: the whole table lies between two visits.
  // The bucket two ahead is fetched now (perf: 57 % of a begin was its first load).
  __builtin_prefetch(&bucket_of(op.key + 2 * kKeysPerBucket), 1);
  Bucket& b = bucket_of(op.key);
  for (int attempt = 0; attempt < kHeldSpins; ++attempt) {
    // The entry to take: one open under the same key (replaced), else a free one, else the
    // oldest operation of the bucket (evicted).
    int same = -1, free = -1, oldest = -1;
    uint64_t same_state = 0, oldest_state = 0, oldest_age = 0;
    for (uint32_t i = 0; i < kWays; ++i) {
      const uint64_t s = b.state[i].load(std::memory_order_acquire);
      if (s == kFree) {
        if (free < 0) free = static_cast<int>(i);
      } else if (s != kHeld) {
        if (same < 0 && b.key[i].load(std::memory_order_relaxed) == op.key) {
          same = static_cast<int>(i);
          same_state = s;
        }
        // Ages, not stamps: the 48-bit stamps wrap (every 39 hours of a 2 GHz TSC).
        const uint64_t age = stamp_ticks_between(s >> 16, op.begin_ticks());
        if (oldest < 0 || age > oldest_age) {
          oldest = static_cast<int>(i);
          oldest_state = s;
          oldest_age = age;
        }
      }
    }
    const int at = same >= 0 ? same : free >= 0 ? free : oldest;
    if (at < 0) {  // every entry held by another thread
      pause();
      continue;
    }
    uint64_t expected = same >= 0 ? same_state : free >= 0 ? kFree : oldest_state;
    if (!b.state[at].compare_exchange_strong(expected, kHeld, std::memory_order_acquire)) {
      continue;  // changed meanwhile: look again
    }
    Begin result = Begin::kInserted;
    if (expected != kFree) {
      *dropped = {b.key[at].load(std::memory_order_relaxed), expected,
                  b.where[at].load(std::memory_order_relaxed),
                  b.tid[at].load(std::memory_order_relaxed)};
      result = dropped->key == op.key ? Begin::kReplaced : Begin::kEvicted;
    }
    b.key[at].store(op.key, std::memory_order_relaxed);
    b.where[at].store(op.where, std::memory_order_relaxed);
    b.tid[at].store(op.tid, std::memory_order_relaxed);
    b.state[at].store(op.begin_word, std::memory_order_release);
    return result;
  }
  return Begin::kBusy;
}

OpenTable::End OpenTable::end(uint64_t key, OpenOp* begun) {
  Bucket& b = bucket_of(key);
  for (int attempt = 0; attempt < kHeldSpins; ++attempt) {
    bool held = false;
    bool changed = false;
    for (uint32_t i = 0; i < kWays; ++i) {
      uint64_t s = b.state[i].load(std::memory_order_acquire);
      if (s == kHeld) {
        held = true;  // perhaps this key's begin, being written
        continue;
      }
      if (s == kFree || b.key[i].load(std::memory_order_relaxed) != key) continue;
      if (!b.state[i].compare_exchange_strong(s, kHeld, std::memory_order_acquire)) {
        changed = true;
        continue;
      }
      // Ours now; the key was read before the exchange, so it is read again.
      if (b.key[i].load(std::memory_order_relaxed) != key) {
        b.state[i].store(s, std::memory_order_release);
        changed = true;
        continue;
      }
      *begun = {key, s, b.where[i].load(std::memory_order_relaxed),
                b.tid[i].load(std::memory_order_relaxed)};
      b.state[i].store(kFree, std::memory_order_release);
      return End::kMatched;
    }
    if (!held && !changed) return End::kUnmatched;
    pause();
  }
  return End::kBusy;
}

bool OpenTable::get(size_t index, OpenOp* op) const {
  if (index >= capacity()) return false;
  const Bucket& b = buckets_[index / kWays];
  const uint32_t i = index % kWays;
  const uint64_t state = b.state[i].load(std::memory_order_acquire);
  if (state <= kHeld) return false;
  *op = {b.key[i].load(std::memory_order_relaxed), state,
         b.where[i].load(std::memory_order_relaxed), b.tid[i].load(std::memory_order_relaxed)};
  std::atomic_thread_fence(std::memory_order_acquire);
  return b.state[i].load(std::memory_order_relaxed) == state;
}

bool OpenTable::mark_reported(size_t index, const OpenOp& op) {
  Bucket& b = buckets_[index / kWays];
  uint64_t where = op.where;
  // A where names one record (its slot and number): unchanged means the same operation.
  return b.where[index % kWays].compare_exchange_strong(where, op.where | OpenOp::kReported,
                                                        std::memory_order_acq_rel);
}

namespace {

// The smallest integer at or above x >= 0, below 2^64 (std::ceil is libm's, which a traced
// program must not have to load for the runtime).
uint64_t ceil_to_integer(double x) {
  if (x >= 1.8e19) return ~uint64_t{0};
  const auto whole = static_cast<uint64_t>(x);
  return static_cast<double>(whole) < x ? whole + 1 : whole;
}

}  // namespace

uint64_t histogram_percentile(const uint64_t* counts, uint64_t total, double percentile) {
  if (total == 0) return 0;
  // The smallest value with at least percentile % of the counts at or below it.
  const uint64_t rank = ceil_to_integer(static_cast<double>(total) * percentile / 100);
  uint64_t seen = 0;
  for (uint32_t b = 0; b < DurationHistogram::kBuckets; ++b) {
    seen += counts[b];
    if (seen >= rank && seen > 0) return DurationHistogram::upper_bound(b);
  }
  return DurationHistogram::upper_bound(DurationHistogram::kBuckets - 1);
}

uint64_t SlidingPercentile::close_epoch(const uint64_t* cumulative) {
  uint64_t* oldest = epochs_[next_];
  window_total_ -= epoch_total_[next_];
  uint64_t added = 0;
  for (uint32_t b = 0; b < DurationHistogram::kBuckets; ++b) {
    window_[b] -= oldest[b];
    // Counts never go down; a writer's counter that did (it cannot) counts nothing.
    const uint64_t d = cumulative[b] >= last_[b] ? cumulative[b] - last_[b] : 0;
    last_[b] = cumulative[b];
    oldest[b] = d;
    window_[b] += d;
    added += d;
  }
  epoch_total_[next_] = added;
  window_total_ += added;
  next_ = (next_ + 1) % kEpochs;
  if (window_total_ < warmup_ || window_total_ == 0) {
    threshold_ = kWarmingUp;
    return threshold_;
  }
  percentile_value_ = histogram_percentile(window_, window_total_, percentile_);
  threshold_ =
      std::min(ceil_to_integer(static_cast<double>(percentile_value_) * factor_), kWarmingUp - 1);
  return threshold_;
}

bool FireLimiter::admit(uint64_t now) {
  if (any_ && cooldown_ns_ != 0 && now - last_ < cooldown_ns_) {
    ++held_back_;
    return false;
  }
  if (cap_ != 0) {
    if (!any_ || now - interval_start_ >= per_ns_) {
      interval_start_ = now;
      in_interval_ = 0;
    }
    if (in_interval_ >= cap_) {
      ++held_back_;
      return false;
    }
    ++in_interval_;
  }
  any_ = true;
  last_ = now;
  ++fired_;
  return true;
}

uint64_t hash_key_bytes(const void* data, size_t size, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

}  // namespace nanotrace::pairing
