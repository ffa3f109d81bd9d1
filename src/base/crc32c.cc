// CRC-32C (Castagnoli) for trace file chunks: the SSE4.2 crc32 instruction when the CPU has
// it, a table-driven fallback otherwise.
//
// The instruction takes three cycles but can start one per cycle, so a single chain of it
// uses a third of what the core can do (about 6 GB/s here): long inputs run three chains over
// three consecutive stretches and combine them (the CRC of A then B is the CRC of A shifted
// over B's length, xor the CRC of B from zero; a shift is linear, so four table lookups).
// That is 12-15 GB/s, which matters because the recorder checksums every byte it writes.
#include <cstring>

#include "base/file_format.hpp"

namespace nanotrace::file {
namespace {

struct Table {
  uint32_t t[256];
  Table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
      t[i] = c;
    }
  }
};

uint32_t crc_soft(uint32_t crc, const uint8_t* p, size_t n) {
  static const Table table;
  for (size_t i = 0; i < n; ++i) crc = table.t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint64_t crc_hw_words(uint64_t c, const uint8_t* p, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  return c;
}

constexpr size_t kStretch = 8192;  // bytes per chain and round: a multiple of 8

// The CRC register after kStretch zero bytes, as a function of the register before.
struct Shift {
  uint32_t t[4][256];
  Shift() {
    static const uint8_t zeros[kStretch] = {};
    uint32_t basis[32];
    for (int b = 0; b < 32; ++b) {
      basis[b] = static_cast<uint32_t>(crc_hw_words(uint32_t{1} << b, zeros, kStretch));
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t r = 0;
        for (int bit = 0; bit < 8; ++bit) {
          if ((v >> bit) & 1) r ^= basis[8 * k + bit];
        }
        t[k][v] = r;
      }
    }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

__attribute__((target("sse4.2"))) uint32_t crc_hw(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = crc;
  if (n >= 3 * kStretch) {
    static const Shift shift;
    while (n >= 3 * kStretch) {
      uint64_t c1 = 0, c2 = 0;
      for (size_t i = 0; i < kStretch; i += 8) {
        uint64_t a, b, d;
        std::memcpy(&a, p + i, 8);
        std::memcpy(&b, p + kStretch + i, 8);
        std::memcpy(&d, p + 2 * kStretch + i, 8);
        c = __builtin_ia32_crc32di(c, a);
        c1 = __builtin_ia32_crc32di(c1, b);
        c2 = __builtin_ia32_crc32di(c2, d);
      }
      c = shift(shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1)) ^
          static_cast<uint32_t>(c2);
      p += 3 * kStretch;
      n -= 3 * kStretch;
    }
  }
  c = crc_hw_words(c, p, n & ~size_t{7});
  p += n & ~size_t{7};
  n &= 7;
  auto c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = __builtin_ia32_crc32qi(c32, *p++);
    --n;
  }
  return c32;
}
#endif

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t size) {
  auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  static const bool hw = __builtin_cpu_supports("sse4.2");
  crc = hw ? crc_hw(crc, p, size) : crc_soft(crc, p, size);
#else
  crc = crc_soft(crc, p, size);
#endif
  return ~crc;
}

}  // namespace nanotrace::file
