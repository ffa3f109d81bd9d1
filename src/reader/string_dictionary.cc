// StringDictionary (nanotrace/columns.hpp): the distinct strings of dictionary-encoded
// columns. A lookup per row is the cost of a string column. A text of up to 8 bytes is its
// own key (every byte in one word, two fixed-size loads): the probe compares the slot's key and
// size and never reaches the stored bytes. A longer text is keyed by a seeded hash of its bytes
// (8 at a time) and compared once with the entry the key finds. The strings and their offsets
// live in ColumnArrays (no copy as they grow); the index alone is rebuilt when half full.
#include <cstring>

#include "base/hash_seed.hpp"
#include "nanotrace/columns.hpp"

namespace nanotrace {
namespace {

constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
constexpr size_t kShort = 8;  // texts up to this size are their own key

uint64_t mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return h;
}

// The 1 to 8 bytes at p as one word holding every one of them (with the size beside it, two
// texts give two keys): fixed-size loads, where a copy of n bytes would be a call per row.
uint64_t load_short(const char* p, size_t n) {
  if (n >= 4) {
    uint32_t first, last;
    std::memcpy(&first, p, 4);
    std::memcpy(&last, p + n - 4, 4);
    return uint64_t{first} << 32 | last;
  }
  const auto byte = [&](size_t i) { return uint64_t{static_cast<uint8_t>(p[i])}; };
  return byte(0) << 16 | byte(n / 2) << 8 | byte(n - 1);
}

uint64_t short_key(std::string_view text) {
  return text.empty() ? 0 : load_short(text.data(), text.size());
}

// Where a key's probe starts in an index of mask + 1 slots (seeded: a trace's texts cannot
// aim at one chain; a long text's key is its seeded hash already).
size_t place(uint64_t key, size_t size, uint64_t seed, size_t mask) {
  const uint64_t h = size <= kShort ? mix((key ^ seed) * kMul + size) : key;
  return static_cast<size_t>(h) & mask;
}

}  // namespace

StringDictionary::StringDictionary() : seed_(hash_seed()) {
  offsets_.push_back(0);
  index_.resize(64);
}

uint64_t StringDictionary::hash(std::string_view text) const {
  const char* p = text.data();
  size_t n = text.size();
  uint64_t h = seed_ ^ (n * kMul);
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (n > 0) h = (h ^ load_short(p, n)) * kMul;
  return mix(h);
}

uint32_t StringDictionary::code_of(std::string_view text) {
  const size_t n = text.size();
  if (n > kShort) return code_of_long(text);
  const size_t mask = index_.size() - 1;
  const uint64_t key = short_key(text);
  for (size_t i = place(key, n, seed_, mask);; i = (i + 1) & mask) {
    const Slot& slot = index_[i];
    if (slot.code_plus_one == 0) return add(text, key, i);
    if (slot.key == key && slot.size == n) return slot.code_plus_one - 1;
  }
}

// Out of line: the registers it needs would otherwise be saved and restored around every
// short text's lookup too.
uint32_t StringDictionary::code_of_long(std::string_view text) {
  const size_t n = text.size();
  const size_t mask = index_.size() - 1;
  const uint64_t key = hash(text);
  for (size_t i = place(key, n, seed_, mask);; i = (i + 1) & mask) {
    const Slot& slot = index_[i];
    if (slot.code_plus_one == 0) return add(text, key, i);
    if (slot.key == key && slot.size == static_cast<uint32_t>(n)) {
      const uint32_t code = slot.code_plus_one - 1;
      const std::string_view entry = (*this)[code];
      if (entry.size() == n && std::memcmp(entry.data(), text.data(), n) == 0) return code;
    }
  }
}

uint32_t StringDictionary::add(std::string_view text, uint64_t key, size_t slot) {
  const auto code = static_cast<uint32_t>(size());
  text_.append(text.data(), text.size());
  offsets_.push_back(text_.size());
  index_[slot] = Slot{key, static_cast<uint32_t>(text.size()), code + 1};
  if (2 * size() > index_.size()) grow_index();
  return code;
}

void StringDictionary::grow_index() {
  std::vector<Slot> old(2 * index_.size());
  old.swap(index_);
  const size_t mask = index_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.code_plus_one == 0) continue;
    size_t i = place(slot.key, slot.size, seed_, mask);
    while (index_[i].code_plus_one != 0) i = (i + 1) & mask;
    index_[i] = slot;
  }
}

}  // namespace nanotrace
