// Text from a trace is data: strings, thread and process names, event and field names all
// come from untrusted bytes. Every writer (JSON, CSV, Perfetto, CTF, HTML, text) turns them
// into valid UTF-8 the same way, here: each ill-formed subsequence becomes one U+FFFD, by
// the Unicode "maximal subpart" practice (what Python's errors="replace" and the WHATWG
// decoder do), so a string cut inside a character ends in one U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace nanotrace::utf8 {

inline constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

// The sequence starting at p (avail >= 1 bytes): its length, and whether it is a well-formed
// character. When it is not, length is the maximal subpart to replace with one U+FFFD.
struct Sequence {
  uint32_t length;
  bool valid;
};
inline Sequence decode(const unsigned char* p, size_t avail) {
  unsigned c = p[0];
  if (c < 0x80) return {1, true};
  uint32_t need;
  unsigned lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    need = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 2;
    if (c == 0xe0) lo = 0xa0;  // no overlong forms
    if (c == 0xed) hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 3;
    if (c == 0xf0) lo = 0x90;  // no overlong forms
    if (c == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
  } else {
    return {1, false};  // a continuation byte, an overlong lead (C0, C1) or F5..FF
  }
  for (uint32_t k = 1; k <= need; ++k) {
    if (k >= avail) return {k, false};  // cut short
    unsigned d = p[k];
    if (d < lo || d > hi) return {k, false};
    lo = 0x80, hi = 0xbf;
  }
  return {need + 1, true};
}

// is_valid for text that is not all ASCII.
bool is_valid_beyond_ascii(std::string_view s);

// True if s is well-formed UTF-8. Inline and 8 bytes at a time for ASCII, the common case:
// every writer checks every string it writes.
inline bool is_valid(std::string_view s) {
  const char* p = s.data();
  const size_t n = s.size();
  uint64_t bits = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    bits |= w;
  }
  for (; i < n; ++i) bits |= static_cast<unsigned char>(p[i]);
  return (bits & 0x8080808080808080ull) == 0 || is_valid_beyond_ascii(s);
}

// Appends s to out with every ill-formed subsequence replaced by U+FFFD.
void append_valid(std::string& out, std::string_view s);
// s as valid UTF-8 (s itself when it already is).
std::string valid(std::string_view s);

// s for a line of human-readable text: valid UTF-8 as above, and no character that breaks or
// rewrites a line: C0 controls and DEL print as \n, \r, \t or \xHH, C1 controls and the
// Unicode line and paragraph separators as \uHHHH.
std::string escape_text(std::string_view s);

}  // namespace nanotrace::utf8
