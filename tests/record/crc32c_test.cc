// The trace file's checksum (base/crc32c.cc) against a bitwise CRC-32C reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/file_format.hpp"

namespace nanotrace {
namespace {

TEST(Crc32cTest, MatchesABitwiseReferenceAtEveryLengthAndAlignment) {
  // Long inputs take three interleaved chains combined by table lookups (base/crc32c.cc);
  // the sum must still be the one CRC-32C, with any start value, length and alignment.
  auto reference = [](uint32_t crc, const uint8_t* p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) {
      crc ^= p[i];
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    }
    return ~crc;
  };
  std::vector<uint8_t> data(3 * 3 * 8192 + 64);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (uint8_t& b : data) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  EXPECT_EQ(file::crc32c(0, "123456789", 9), 0xe3069283u);  // the standard check value
  std::vector<size_t> lengths = {0, 1, 7, 8, 9, 4095, 24575, 24576, 24577, 49152, 49159};
  for (size_t n = 100; n < 3 * 3 * 8192; n += 2999) lengths.push_back(n);
  for (size_t n : lengths) {
    for (size_t offset : {0, 1, 3, 8, 13}) {
      ASSERT_EQ(file::crc32c(uint32_t(n), data.data() + offset, n),
                reference(uint32_t(n), data.data() + offset, n))
          << "length " << n << " offset " << offset;
    }
  }
  // Chained calls give the CRC of the concatenation.
  uint32_t whole = file::crc32c(0, data.data(), 60000);
  uint32_t parts = file::crc32c(file::crc32c(0, data.data(), 30001), data.data() + 30001, 29999);
  EXPECT_EQ(whole, parts);
}

}  // namespace
}  // namespace nanotrace
