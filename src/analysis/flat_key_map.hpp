// FlatKeyMap: a hash map from 8-byte keys to small values, stored in one array (open
// addressing, linear probing), for the interval matcher's open intervals. An
// std::unordered_map allocates a node per entry and, keyed by std::string, copies the key:
// most of a pair's cost when a trace opens and closes millions of intervals. Here an entry is
// a slot in an array that stays in cache (a trace holds few intervals open at once).
//
// Erasing shifts the following entries of the probe run back (no tombstones), so lookups
// stay short however many keys come and go. The hash is seeded per process, so that a
// hostile trace cannot easily choose keys that all collide.
//
// Internal header (src/analysis). Thread safety: none; a map belongs to one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "base/hash_seed.hpp"

namespace nanotrace::analysis {

template <class V>
class FlatKeyMap {
 public:
  FlatKeyMap() : seed_(hash_seed()) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The value of key, and whether it was inserted (as `value`) rather than found. The
  // pointer is valid until the next insertion or erasure.
  std::pair<V*, bool> try_emplace(uint64_t key, const V& value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = key;
        s.value = value;
        ++size_;
        return {&s.value, true};
      }
      if (s.key == key) return {&s.value, false};
    }
  }

  // The value of key, and whether it was inserted (as V{}, for the caller to fill in place)
  // rather than found. The pointer is valid until the next insertion or erasure.
  std::pair<V*, bool> find_or_insert(uint64_t key) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = key;
        s.value = V{};
        ++size_;
        return {&s.value, true};
      }
      if (s.key == key) return {&s.value, false};
    }
  }

  // The value of key, or null.
  V* find(uint64_t key) {
    if (size_ == 0) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }

  // Calls f(value) on key's value, then removes it; false (and no call) if key is absent.
  // The value is used where it lies: no copy out.
  template <class F>
  bool take_with(uint64_t key, F&& f) {
    if (size_ == 0) return false;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) return false;
      if (s.key == key) {
        f(s.value);
        erase_slot(i);
        return true;
      }
    }
  }

  // Removes key, moving its value to *out. False (and *out untouched) if absent.
  bool take(uint64_t key, V* out) {
    if (size_ == 0) return false;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) return false;
      if (s.key == key) {
        *out = std::move(s.value);
        erase_slot(i);
        return true;
      }
    }
  }

  bool erase(uint64_t key) {
    V unused;
    return take(key, &unused);
  }

  // Calls f(key, value) for every entry, in no particular order.
  template <class F>
  void for_each(F&& f) {
    for (Slot& s : slots_) {
      if (s.used) f(s.key, s.value);
    }
  }

  // Removes every entry, keeping the memory.
  void clear() {
    for (Slot& s : slots_) s.used = false;
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    bool used = false;
    V value{};
  };

  size_t home(uint64_t key) const {
    // Fibonacci hashing: one multiplication; the product's top bits depend on every bit of
    // the key, and consecutive keys (request numbers) land far apart.
    return static_cast<size_t>(((key ^ seed_) * 0x9e3779b97f4a7c15ull) >> shift_);
  }

  // Backward-shift deletion: entries after the hole move into it when the hole lies between
  // their home slot and where they sit, so every probe run stays unbroken.
  void erase_slot(size_t hole) {
    for (size_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
      Slot& s = slots_[j];
      if (!s.used) break;
      const size_t h = home(s.key);
      const bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
      if (movable) {
        slots_[hole] = std::move(s);
        hole = j;
      }
    }
    slots_[hole].used = false;
    --size_;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t n = old.empty() ? 16 : 2 * old.size();
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    shift_ = 64 - __builtin_ctzll(n);
    size_ = 0;
    for (Slot& s : old) {
      if (s.used) try_emplace(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
  uint64_t seed_;
};

}  // namespace nanotrace::analysis
