// StringDictionary (nanotrace/columns.hpp): the distinct strings of dictionary-encoded
// columns. A lookup per row is the cost of a string column, so it is one seeded hash of the
// bytes (8 at a time), a probe of an array of 8-byte slots whose high half holds the hash's
// own high bits (a mismatch rarely reaches the bytes), and one compare. The strings and their
// offsets live in ColumnArrays (no copy as they grow); the index alone is rebuilt when it is
// half full.
#include <cstring>

#include "base/hash_seed.hpp"
#include "nanotrace/columns.hpp"

namespace nanotrace {
namespace {

constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;

uint64_t mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return h;
}

// The 1 to 7 bytes at p as one word, every byte in it (with the length hashed beside it, two
// strings of one length give two words): fixed-size loads, where a copy of n bytes would be a
// call per row.
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

// Equal texts; short ones compared as one word each (no call per row).
bool same(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.size() == 0) return true;
  if (a.size() < 8) return load_short(a.data(), a.size()) == load_short(b.data(), b.size());
  return std::memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

StringDictionary::StringDictionary() : seed_(hash_seed()) {
  offsets_.push_back(0);
  index_.assign(64, 0);
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
  const uint64_t h = hash(text);
  const uint64_t tag = h & ~uint64_t{0xffffffff};
  const size_t mask = index_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint64_t slot = index_[i];
    if (slot == 0) return add(text, h, i);
    if ((slot & ~uint64_t{0xffffffff}) == tag) {
      const auto code = static_cast<uint32_t>(slot - 1);
      const std::string_view entry = (*this)[code];
      if (same(entry, text)) return code;
    }
  }
}

uint32_t StringDictionary::add(std::string_view text, uint64_t h, size_t slot) {
  const auto code = static_cast<uint32_t>(size());
  text_.append(text.data(), text.size());
  offsets_.push_back(text_.size());
  index_[slot] = (h & ~uint64_t{0xffffffff}) | (uint64_t{code} + 1);
  if (2 * size() > index_.size()) grow_index();
  return code;
}

void StringDictionary::grow_index() {
  std::vector<uint64_t> old(2 * index_.size(), 0);
  old.swap(index_);
  const size_t mask = index_.size() - 1;
  for (uint64_t slot : old) {
    if (slot == 0) continue;
    const uint64_t h = hash((*this)[static_cast<uint32_t>(slot - 1)]);
    size_t i = h & mask;
    while (index_[i] != 0) i = (i + 1) & mask;
    index_[i] = slot;
  }
}

}  // namespace nanotrace
