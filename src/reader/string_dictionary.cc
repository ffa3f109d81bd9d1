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
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kMul;
  }
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
      if (entry.size() == text.size() && std::memcmp(entry.data(), text.data(), text.size()) == 0) {
        return code;
      }
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
