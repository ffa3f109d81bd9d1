// Where the writer cuts a string field that is longer than a record holds: never inside a
// UTF-8 character, so a long UTF-8 string stays valid UTF-8 once cut. Header-only and
// constexpr for the hot path: a string that fits costs one comparison.
#pragma once

#include <cstddef>

namespace nanotrace::detail {

// The number of bytes of s to keep, at most max: max itself, or less when s[max] (the first
// byte dropped) continues a well-formed multi-byte character that starts before max, in
// which case the whole character is dropped. Ill-formed bytes are not repaired here (readers
// replace them with U+FFFD). n: the bytes of s available; when s is longer than max, n must
// be at least max + 1 (s[max] is read).
constexpr std::size_t utf8_cut(const char* s, std::size_t n, std::size_t max) noexcept {
  if (n <= max) return n;
  std::size_t start = max;
  std::size_t continuation = 0;
  while (continuation < 3 && start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) {
    --start;
    ++continuation;
  }
  if (continuation == 0) return max;  // the cut falls between characters
  auto lead = static_cast<unsigned char>(s[start]);
  std::size_t length = lead >= 0xc2 && lead <= 0xdf   ? 2
                       : lead >= 0xe0 && lead <= 0xef ? 3
                       : lead >= 0xf0 && lead <= 0xf4 ? 4
                                                      : 0;
  return length != 0 && start + length > max ? start : max;
}

}  // namespace nanotrace::detail
