// Making untrusted text valid UTF-8 (see utf8.hpp).
#include "base/utf8.hpp"

#include <fmt/format.h>

namespace nanotrace::utf8 {

bool is_valid_beyond_ascii(std::string_view s) {
  auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    Sequence seq = decode(p + i, n - i);
    if (!seq.valid) return false;
    i += seq.length;
  }
  return true;
}

void append_valid(std::string& out, std::string_view s) {
  auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && p[j] < 0x80) ++j;
    while (j < n) {  // extend over well-formed characters
      Sequence seq = decode(p + j, n - j);
      if (!seq.valid) break;
      j += seq.length;
    }
    out.append(s.data() + i, j - i);
    if (j == n) break;
    Sequence bad = decode(p + j, n - j);
    out.append(kReplacement);
    i = j + bad.length;
  }
}

std::string valid(std::string_view s) {
  if (is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  append_valid(out, s);
  return out;
}

std::string escape_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (c < 0x80) {
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else {
        out += fmt::format("\\x{:02x}", c);
      }
      ++i;
      continue;
    }
    Sequence seq = decode(p + i, n - i);
    if (!seq.valid) {
      out.append(kReplacement);
    } else if (seq.length == 2 && c == 0xc2 && p[i + 1] < 0xa0) {  // C1: U+0080..U+009F
      out += fmt::format("\\u{:04x}", p[i + 1]);
    } else if (seq.length == 3 && c == 0xe2 && p[i + 1] == 0x80 &&
               (p[i + 2] == 0xa8 || p[i + 2] == 0xa9)) {  // U+2028, U+2029
      out += fmt::format("\\u{:04x}", 0x2000 + (p[i + 2] - 0x80));
    } else {
      out.append(s.data() + i, seq.length);
    }
    i += seq.length;
  }
  return out;
}

}  // namespace nanotrace::utf8
