// Appending JSON text through a raw pointer, for exporters that encode millions of records:
// the caller reserves the record's worst-case size once, then each piece is a few stores
// with no capacity check. Why not fmt or nlohmann here: per small piece, their buffer
// appends (capacity check, out-of-line memcpy) and formatting machinery cost more than the
// value itself (~100 ns of a ~150 ns record). Integers are written two digits at a time, and
// everything that is not a plain case (escapes, invalid UTF-8, most doubles) falls back to
// the shared json_string() and to fmt, so the text is byte for byte what they write.
#pragma once

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace nanotrace::exporter::json {

// Bytes that may be read past the end of a Piece and written past the end of a reserved
// record: pieces are copied in whole 16-byte chunks.
inline constexpr size_t kSlack = 32;

// Constant text (keys, per-event prefixes) kept in one arena with kSlack bytes of padding
// after it, so that put() may copy it in whole chunks.
struct Piece {
  const char* data = nullptr;
  uint32_t size = 0;
};

class PieceArena {
 public:
  // Returns a handle for s; resolve it with piece() after seal().
  uint32_t add(std::string_view s) {
    auto offset = static_cast<uint32_t>(text_.size());
    text_.append(s);
    sizes_.push_back(static_cast<uint32_t>(s.size()));
    offsets_.push_back(offset);
    return static_cast<uint32_t>(offsets_.size() - 1);
  }
  // Seals the arena: no add() after this.
  void seal() { text_.append(kSlack, '\0'); }
  Piece piece(uint32_t handle) const { return {text_.data() + offsets_[handle], sizes_[handle]}; }

 private:
  std::string text_;
  std::vector<uint32_t> offsets_;
  std::vector<uint32_t> sizes_;
};

inline char* put(char* p, Piece s) {
  // Whole chunks: a 16-byte memcpy is one vector move, one of a run-time size a library call.
  for (uint32_t i = 0; i < s.size; i += 16) std::memcpy(p + i, s.data + i, 16);
  return p + s.size;
}

namespace detail {
// "00" to "99", two bytes each.
inline constexpr std::array<char, 200> kDigitPairs = [] {
  std::array<char, 200> t{};
  for (int i = 0; i < 100; ++i) {
    t[2 * i] = static_cast<char>('0' + i / 10);
    t[2 * i + 1] = static_cast<char>('0' + i % 10);
  }
  return t;
}();
}  // namespace detail

// Decimal digits, two at a time from a table, inline (GCC 12 keeps std::to_chars out of
// line here: a call per value). Writes up to 20 bytes past p (within kSlack).
inline char* put_u64(char* p, uint64_t v) {
  char tmp[40] = {};
  char* q = tmp + 20;
  while (v >= 100) {
    q -= 2;
    std::memcpy(q, &detail::kDigitPairs[(v % 100) * 2], 2);
    v /= 100;
  }
  if (v >= 10) {
    q -= 2;
    std::memcpy(q, &detail::kDigitPairs[v * 2], 2);
  } else {
    *--q = static_cast<char>('0' + v);
  }
  std::memcpy(p, q, 20);  // whole: the digits and what follows them in tmp
  return p + (tmp + 20 - q);
}
inline char* put_i64(char* p, int64_t v) {
  if (v >= 0) return put_u64(p, static_cast<uint64_t>(v));
  *p = '-';
  return put_u64(p + 1, 0 - static_cast<uint64_t>(v));
}

namespace detail {
// ".000" to ".999", four bytes each.
inline constexpr std::array<char, 4000> kMillis = [] {
  std::array<char, 4000> t{};
  for (int i = 0; i < 1000; ++i) {
    t[4 * i] = '.';
    t[4 * i + 1] = static_cast<char>('0' + i / 100);
    t[4 * i + 2] = static_cast<char>('0' + i / 10 % 10);
    t[4 * i + 3] = static_cast<char>('0' + i % 10);
  }
  return t;
}();
// 1 for bytes a JSON string holds as they are (printable ASCII but '"' and '\\').
inline constexpr std::array<uint8_t, 256> kPlain = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[c] = c != '"' && c != '\\';
  return t;
}();
}  // namespace detail

// ns as microseconds with three decimals ("12.345"), as micros() in output.hpp writes it.
inline char* put_micros(char* p, uint64_t ns) {
  p = put_u64(p, ns / 1000);
  std::memcpy(p, &detail::kMillis[4 * (ns % 1000)], 4);
  return p + 4;
}

// Longest output of put_double(): fmt's shortest round-trip form and ".0", or "-Infinity".
inline constexpr size_t kMaxDouble = 32;
// Outside the fast path: fmt's "{}" (shortest round trip) with ".0" added when it has
// neither a point nor an exponent (-0.0 stays -0.0, 2.0 does not become the integer 2);
// non-finite values as the strings "NaN", "Infinity" and "-Infinity" (protobuf's JSON
// mapping).
char* put_double_slow(char* p, double d);

// d as put_double_slow() writes it. Fast path: values with at most three decimals and fewer than 16
// significant digits (latencies, ratios), whose shortest round-trip form is the decimal itself
// (any such decimal converts to a double no other decimal of <= 15 digits converts to).
inline char* put_double(char* p, double d) {
  double scaled = d * 1000.0;
  if (scaled > -1e15 && scaled < 1e15) {
    auto k = static_cast<int64_t>(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
    if (static_cast<double>(k) / 1000.0 == d && (k != 0 || !std::signbit(d))) {
      uint64_t u = k < 0 ? 0 - static_cast<uint64_t>(k) : static_cast<uint64_t>(k);
      *p = '-';
      p += k < 0;
      p = put_u64(p, u / 1000);
      auto millis = static_cast<uint32_t>(u % 1000);
      std::memcpy(p, &detail::kMillis[4 * millis], 4);
      // Trailing zeros are dropped, but for one after the point.
      int len = millis % 100 == 0 ? 2 : millis % 10 == 0 ? 3 : 4;
      return p + len;
    }
  }
  return put_double_slow(p, d);
}

// Longest output of put_string(): every byte escaped as \u00XX or \ufffd, plus quotes.
inline constexpr size_t max_string(size_t bytes) { return 6 * bytes + 2; }
// Escapes and invalid UTF-8 (U+FFFD) through json_string() of output.hpp.
char* put_string_slow(char* p, std::string_view s);

// s as a JSON string literal, exactly as json_string() of output.hpp writes it.
inline char* put_string(char* p, std::string_view s) {
  char* q = p;
  *q++ = '"';
  for (char c : s) {
    if (!detail::kPlain[static_cast<uint8_t>(c)]) return put_string_slow(p, s);
    *q++ = c;
  }
  *q++ = '"';
  return q;
}

// Longest output of put_pointer(): "0x" and 16 hex digits, quoted.
inline constexpr size_t kMaxPointer = 20;
// v as a quoted lowercase hex string, "0x{:x}" in fmt.
inline char* put_pointer(char* p, uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  int digits = v == 0 ? 1 : (67 - __builtin_clzll(v)) / 4;
  std::memcpy(p, "\"0x", 3);
  char* end = p + 3 + digits;
  for (char* q = end; q > p + 3; v >>= 4) *--q = kHex[v & 15];
  *end = '"';
  return end + 1;
}

inline char* put_bool(char* p, bool v) {
  std::memcpy(p, v ? "true\0\0\0" : "false\0\0", 8);
  return p + (v ? 4 : 5);
}

}  // namespace nanotrace::exporter::json
