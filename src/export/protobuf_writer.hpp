// A minimal protobuf wire-format encoder for the Perfetto export, appending to a
// fmt::memory_buffer. Nested messages get a 4-byte padded varint length that is patched when
// the message ends (as protozero does), so no message is built twice.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/utf8.hpp"

namespace nanotrace::exporter {

class Proto {
 public:
  explicit Proto(fmt::memory_buffer* b) : b_(b) {}
  void varint(uint64_t v) {
    char tmp[10] = {};  // (g++ 12 warns, wrongly, of bytes used uninitialized otherwise)
    int n = 0;
    while (v >= 0x80) {
      tmp[n++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    tmp[n++] = static_cast<char>(v);
    b_->append(tmp, tmp + n);
  }
  void tag(uint32_t field, uint32_t wire) { varint(uint64_t{field} << 3 | wire); }
  // A varint field: uint32/64, bool, enum, and int32/int64 as two's complement (a negative
  // int32 sign-extended to ten bytes, as protobuf wants).
  void uint(uint32_t field, uint64_t v) {
    tag(field, 0);
    varint(v);
  }
  void fixed64(uint32_t field, uint64_t bits) {
    tag(field, 1);
    char tmp[8];
    std::memcpy(tmp, &bits, 8);
    b_->append(tmp, tmp + 8);
  }
  // A string field: protobuf strings must be valid UTF-8 (utf8::valid repairs them).
  void bytes(uint32_t field, std::string_view s) {
    if (!utf8::is_valid(s)) {
      std::string repaired = utf8::valid(s);
      return raw_bytes(field, repaired);
    }
    raw_bytes(field, s);
  }
  void raw_bytes(uint32_t field, std::string_view s) {
    tag(field, 2);
    varint(s.size());
    b_->append(s.data(), s.data() + s.size());
  }
  // Bytes that are already encoded fields of the message being written.
  void append_encoded(const fmt::memory_buffer& fields) {
    b_->append(fields.data(), fields.data() + fields.size());
  }
  // Opens a nested message; returns the offset of its length to patch in end(). A message
  // holds at most 2^28 - 1 bytes.
  size_t begin(uint32_t field) {
    tag(field, 2);
    size_t at = b_->size();
    const char pad[4] = {'\x80', '\x80', '\x80', '\0'};
    b_->append(pad, pad + 4);
    return at;
  }
  void end(size_t at) {
    size_t len = b_->size() - at - 4;
    char* p = b_->data() + at;
    for (int i = 0; i < 3; ++i) p[i] = static_cast<char>((len >> (7 * i) & 0x7f) | 0x80);
    p[3] = static_cast<char>(len >> 21 & 0x7f);
  }

 private:
  fmt::memory_buffer* b_;
};

}  // namespace nanotrace::exporter
