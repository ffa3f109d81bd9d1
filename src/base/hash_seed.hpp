// A random seed for hash tables keyed by values from a trace (untrusted): chosen once per
// process, so that a hostile trace cannot easily choose keys that all collide.
#pragma once

#include <sys/auxv.h>

#include <cstdint>
#include <cstring>

namespace nanotrace {

// The kernel's random bytes given to every program (AT_RANDOM), or a constant without them.
inline uint64_t hash_seed() {
  static const uint64_t seed = [] {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    if (const auto* random = reinterpret_cast<const uint8_t*>(getauxval(AT_RANDOM))) {
      std::memcpy(&s, random, sizeof s);
    }
    return s;
  }();
  return seed;
}

}  // namespace nanotrace
