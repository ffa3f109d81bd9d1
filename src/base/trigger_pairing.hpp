// The pairing behind duration triggers (`io:submit..io:complete by req > 5ms`): a bounded table
// of the operations still open, a histogram of the durations of recent pairs for relative
// thresholds (`> 10 x p99`), and the fire limits (`cap 3 per 10s`, `cooldown 1s`). The traced
// process's runtime pairs the records of its own threads with them (src/runtime/duration_*),
// and the recorder the records it drains (src/record/duration_watch*): one pairing for both.
//
// OpenTable is shared by every thread that begins or ends operations, without a lock: a
// thread that finds an entry it needs held by another for longer than a few hundred pauses
// (that thread descheduled) gives up, and its caller counts the record as one the pairing
// could not see. Memory is fixed when the table is made: when a bucket is full, the oldest
// operation in it is dropped (and counted) for the new one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "nanotrace/abi.hpp"
#include "nanotrace/field_value.hpp"

namespace nanotrace::pairing {

// A record's first word holds the low 48 bits of its clock value (abi.hpp): past 2^48 ticks
// (39 hours of a 2 GHz TSC, 78 of CLOCK_MONOTONIC ns) a stamp is no longer the clock value.
// Stamps are therefore compared as 48-bit differences, and a full clock value is the one
// nearest a full clock value known to be near (ages and durations under 2^47 ticks).

// end - begin of two 48-bit stamps, 0 if end comes first (another core's clock a little
// behind).
inline uint64_t stamp_ticks_between(uint64_t begin48, uint64_t end48) {
  const uint64_t delta = (end48 - begin48) & abi::kTsc48Mask;
  return (delta & (uint64_t{1} << 47)) != 0 ? 0 : delta;
}

// One open operation: its begin record and the key it is open under.
struct OpenOp {
  uint64_t key = 0;
  uint64_t begin_word = 0;  // the begin record's first word: 48-bit stamp << 16 | event id
  uint64_t where = 0;       // where_of(slot, seq), plus kReported once a stuck firing named it
  uint64_t tid = 0;         // the thread that wrote the begin record
  uint64_t begin_ticks() const { return begin_word >> 16; }  // the 48-bit stamp
  // The begin's full clock value, given a full clock value `near` it (now, when aging).
  uint64_t begin_full(uint64_t near) const { return abi::expand_ticks(near, begin_ticks()); }
  uint16_t event() const { return static_cast<uint16_t>(begin_word & 0xffff); }
  uint32_t slot() const { return static_cast<uint32_t>((where >> 48) & 0x7fff); }
  uint64_t seq() const { return where & ((uint64_t{1} << 48) - 1); }
  bool reported() const { return (where & kReported) != 0; }
  static constexpr uint64_t kReported = uint64_t{1} << 63;
  static uint64_t where_of(uint32_t slot, uint64_t seq) {
    return (uint64_t{slot & 0x7fff} << 48) | (seq & ((uint64_t{1} << 48) - 1));
  }
};

class OpenTable {
 public:
  enum class Begin {
    kInserted,
    kReplaced,  // an open operation of the same key ended unmatched (in *dropped)
    kEvicted,   // the bucket was full: its oldest operation was dropped (in *dropped)
    kBusy,      // every entry of the bucket was held by other threads: not inserted
  };
  enum class End {
    kMatched,    // the operation was open: removed, in *begun
    kUnmatched,  // no operation of this key is open
    kBusy,       // an entry was held by another thread too long to tell
  };

  // capacity: operations (rounded up to a power of two, at least 64). The memory is mapped
  // here (zero pages until used) and given back by the destructor.
  explicit OpenTable(size_t capacity);
  ~OpenTable();
  OpenTable(const OpenTable&) = delete;
  OpenTable& operator=(const OpenTable&) = delete;

  bool ok() const { return buckets_ != nullptr; }  // false if the memory could not be mapped
  size_t capacity() const { return bucket_count_ * kWays; }
  size_t bytes() const { return bucket_count_ * sizeof(Bucket); }

  // Opens op.key (op.begin_word > 1). Lock-free.
  Begin begin(const OpenOp& op, OpenOp* dropped);
  // Closes the operation open under key. Lock-free.
  End end(uint64_t key, OpenOp* begun);

  // Calls visit(index, op) for each operation open, each a consistent copy (one that changes
  // meanwhile is skipped). Runs beside begin() and end().
  template <class Visit>
  void for_each(Visit&& visit) const;
  // The operation open at `index` (a consistent copy), if there is one.
  bool get(size_t index, OpenOp* op) const;
  // Marks the operation at `index` reported, if it is still `op`. True if marked.
  bool mark_reported(size_t index, const OpenOp& op);
  // Empties the table; REQUIRES: no thread uses it meanwhile.
  void clear();
  // Gives its pages back to the system; any later use finds an empty table. For a table that
  // threads may still touch for a moment (a trigger just replaced).
  void release_pages();

 private:
  static constexpr uint32_t kWays = 4;
  static constexpr uint64_t kKeysPerBucket = 4;  // consecutive keys sharing a bucket
  static constexpr uint64_t kFree = 0;
  static constexpr uint64_t kHeld = 1;
  // Two cache lines: what a lookup compares, then what it reads once it found its entry.
  struct alignas(64) Bucket {
    std::atomic<uint64_t> state[kWays];  // kFree, kHeld, or the begin word
    std::atomic<uint64_t> key[kWays];
    std::atomic<uint64_t> where[kWays];
    std::atomic<uint64_t> tid[kWays];
  };
  static_assert(sizeof(Bucket) == 128);
  // Keys close together (request numbers, pointers into one array) go to the same or nearby
  // buckets (four consecutive numbers share one), so the operations in flight share cache
  // lines and pages; the higher bits are folded in so strides and aligned pointers spread
  // over every bucket.
  Bucket& bucket_of(uint64_t key) const {
    const uint64_t folded = key ^ (key >> 7) ^ (key >> 17) ^ (key >> 31) ^ (key >> 47);
    static_assert(kKeysPerBucket == 4);
    return buckets_[(folded >> 2) & (bucket_count_ - 1)];
  }

  Bucket* buckets_ = nullptr;
  size_t bucket_count_ = 0;
};

template <class Visit>
void OpenTable::for_each(Visit&& visit) const {
  for (size_t b = 0; b < bucket_count_; ++b) {
    const Bucket& bucket = buckets_[b];
    for (uint32_t i = 0; i < kWays; ++i) {
      const uint64_t state = bucket.state[i].load(std::memory_order_acquire);
      if (state <= kHeld) continue;
      OpenOp op{bucket.key[i].load(std::memory_order_relaxed), state,
                bucket.where[i].load(std::memory_order_relaxed),
                bucket.tid[i].load(std::memory_order_relaxed)};
      std::atomic_thread_fence(std::memory_order_acquire);
      // Begin words are unique: the same one means the same operation throughout.
      if (bucket.state[i].load(std::memory_order_relaxed) != state) continue;
      visit(b * kWays + i, op);
    }
  }
}

// Durations in a log-linear histogram: 8 buckets per power of two (12.5 % wide), from 0 to
// 2^64 ticks. Each writer counts into a histogram of its own; summing copies gives the
// window's distribution.
struct DurationHistogram {
  static constexpr uint32_t kSubBits = 3;
  static constexpr uint32_t kBuckets = (64 - kSubBits + 1) << kSubBits;
  uint32_t counts[kBuckets];

  static uint32_t bucket(uint64_t v) {
    if (v < (uint64_t{1} << kSubBits)) return static_cast<uint32_t>(v);
    const uint32_t msb = 63 - static_cast<uint32_t>(__builtin_clzll(v));
    const uint32_t sub = static_cast<uint32_t>(v >> (msb - kSubBits)) & ((1u << kSubBits) - 1);
    return ((msb - kSubBits + 1) << kSubBits) + sub;
  }
  // The largest value of a bucket (a percentile is read as its bucket's upper bound).
  static uint64_t upper_bound(uint32_t b) {
    if (b < (1u << kSubBits)) return b;
    const uint32_t msb = (b >> kSubBits) + kSubBits - 1;
    const uint64_t sub = b & ((1u << kSubBits) - 1);
    const uint64_t low = (uint64_t{1} << msb) | (sub << (msb - kSubBits));
    return low + (uint64_t{1} << (msb - kSubBits)) - 1;
  }
};

// The value below which `percentile` % of the counts fall (the bucket's upper bound), over
// `total` counts; 0 if there are none.
uint64_t histogram_percentile(const uint64_t* counts, uint64_t total, double percentile);

// A relative threshold over a sliding window: the window is kEpochs epochs; each epoch the
// caller adds the pairs that ended during it (cumulative counts, as the writers keep them),
// and the threshold is factor x percentile of the last kEpochs epochs once they hold `warmup`
// pairs. Belongs to one thread.
class SlidingPercentile {
 public:
  static constexpr uint32_t kEpochs = 8;
  SlidingPercentile(double factor, double percentile, uint64_t warmup)
      : factor_(factor), percentile_(percentile), warmup_(warmup) {}
  // Closes an epoch whose pairs are `cumulative` minus the last epoch's cumulative counts
  // (counts never go down). Returns the threshold (ticks), or kWarmingUp.
  uint64_t close_epoch(const uint64_t* cumulative);
  static constexpr uint64_t kWarmingUp = ~uint64_t{0};
  uint64_t threshold() const { return threshold_; }
  uint64_t window_pairs() const { return window_total_; }
  uint64_t percentile_value() const { return percentile_value_; }

 private:
  double factor_, percentile_;
  uint64_t warmup_;
  uint64_t last_[DurationHistogram::kBuckets] = {};
  uint64_t epochs_[kEpochs][DurationHistogram::kBuckets] = {};
  uint64_t epoch_total_[kEpochs] = {};
  uint64_t window_[DurationHistogram::kBuckets] = {};
  uint64_t window_total_ = 0;
  uint32_t next_ = 0;
  uint64_t threshold_ = kWarmingUp;
  uint64_t percentile_value_ = 0;
};

// How many fires a trigger may have: at most `cap` in each interval of `per` (ns), the first
// starting at the first fire and the next at the first fire after it ended, and none within
// `cooldown` (ns) of the last fire. Fires held back are counted. Belongs to whoever may fire
// (one at a time); `now` is the caller's clock in ns.
class FireLimiter {
 public:
  FireLimiter(uint32_t cap, uint64_t per_ns, uint64_t cooldown_ns)
      : cap_(cap), per_ns_(per_ns), cooldown_ns_(cooldown_ns) {}
  // True if a fire may happen now (and counts it as one); false if held back (counted).
  bool admit(uint64_t now_ns);
  uint64_t fired() const { return fired_; }
  uint64_t held_back() const { return held_back_; }

 private:
  uint32_t cap_;
  uint64_t per_ns_, cooldown_ns_;
  uint64_t interval_start_ = 0, last_ = 0;
  uint32_t in_interval_ = 0;
  bool any_ = false;
  uint64_t fired_ = 0, held_back_ = 0;
};

// A key's 64 bits from bytes (a string key, or a key of several fields): FNV-1a mixed.
uint64_t hash_key_bytes(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ull);

// The key of a record whose key is a string or several fields, hashed the same way in the
// traced process and in a recorder: each field in the rule's order, a string as its length
// (4 bytes) then its bytes, any other value as its 8 bytes. `fields`: indexes into values.
template <class Fields>
uint64_t hash_key_fields(const FieldValue* values, const Fields& fields) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (auto f : fields) {
    const FieldValue& v = values[f];
    if (v.type == abi::FieldType::kString) {
      const auto n = static_cast<uint32_t>(v.text.size());
      h = hash_key_bytes(&n, sizeof(n), h);
      h = hash_key_bytes(v.text.data(), v.text.size(), h);
    } else {
      h = hash_key_bytes(&v.bits, sizeof(v.bits), h);
    }
  }
  return h;
}

}  // namespace nanotrace::pairing
