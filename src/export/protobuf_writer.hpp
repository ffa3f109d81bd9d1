// A minimal protobuf wire-format encoder for the Perfetto export, appending to a
// fmt::memory_buffer. A nested message's length is patched when the message ends, so no
// message is built twice: one byte is set aside for it, and the rare message of 128 bytes or
// more moves up to make room for a longer length.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "base/utf8.hpp"

namespace nanotrace::exporter {

class Proto {
 public:
  explicit Proto(fmt::memory_buffer* b) : b_(b) {}
  // Each field is written in place: room for its largest encoding is reserved first, then
  // the bytes are stored through a pointer (no temporary, no append call per field).
  void varint(uint64_t v) {
    char* p = room(10);
    p = put_varint(p, v);
    commit(p);
  }
  void tag(uint32_t field, uint32_t wire) { varint(uint64_t{field} << 3 | wire); }
  // A varint field: uint32/64, bool, enum, and int32/int64 as two's complement (a negative
  // int32 sign-extended to ten bytes, as protobuf wants).
  void uint(uint32_t field, uint64_t v) {
    char* p = room(20);
    p = put_varint(p, uint64_t{field} << 3);
    p = put_varint(p, v);
    commit(p);
  }
  void fixed64(uint32_t field, uint64_t bits) {
    char* p = room(18);
    p = put_varint(p, uint64_t{field} << 3 | 1);
    std::memcpy(p, &bits, 8);
    commit(p + 8);
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
    char* p = room(20 + s.size());
    p = put_varint(p, uint64_t{field} << 3 | 2);
    p = put_varint(p, s.size());
    std::memcpy(p, s.data(), s.size());
    commit(p + s.size());
  }
  // Bytes that are already encoded fields of the message being written.
  void append_encoded(const fmt::memory_buffer& fields) {
    b_->append(fields.data(), fields.data() + fields.size());
  }
  // Opens a nested message; returns the offset of its length to patch in end().
  size_t begin(uint32_t field) {
    char* p = room(11);
    p = put_varint(p, uint64_t{field} << 3 | 2);
    const size_t at = static_cast<size_t>(p - b_->data());
    commit(p + 1);
    return at;
  }
  // Closes the message begun at `at`. Its length was given one byte, enough for most
  // messages; a longer one moves its bytes up to make room for the length (once per message:
  // a trace's bytes move at most once per level of nesting above 127 bytes).
  void end(size_t at) {
    const size_t len = b_->size() - at - 1;
    if (len < 0x80) {
      b_->data()[at] = static_cast<char>(len);
      return;
    }
    size_t extra = 0;
    for (size_t v = len >> 7; v != 0; v >>= 7) ++extra;
    room(extra);
    char* p = b_->data() + at;
    std::memmove(p + 1 + extra, p + 1, len);
    put_varint(p, len);
    b_->try_resize(b_->size() + extra);
  }

  // A pointer to at least n writable bytes at the end of the buffer (for ProtoRaw), and the
  // end of what was written there.
  char* room(size_t n) {
    b_->try_reserve(b_->size() + n);
    return b_->data() + b_->size();
  }
  void commit(char* end) { b_->try_resize(static_cast<size_t>(end - b_->data())); }

  static char* put_varint(char* p, uint64_t v) {
    while (v >= 0x80) {
      *p++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
  }
  fmt::memory_buffer* b_;
};

// The same encoding through a raw pointer into room reserved beforehand (Proto::room, then
// Proto::commit): for a hot path that knows its largest encoding, without a buffer update
// per field. A nested message's length gets one byte; each message needs 2 bytes of room
// beyond its content, for a length of up to 2^21 - 1 bytes.
class ProtoRaw {
 public:
  explicit ProtoRaw(char* p) : p_(p) {}
  char* pos() const { return p_; }
  // Fields encoded beforehand (Encoded::of): one fixed-size copy, then the position moves by
  // their size. Needs room for sizeof(Encoded) bytes.
  struct Encoded {
    char bytes[23] = {};
    uint8_t size = 0;
  };
  void encoded(const Encoded& e) {
    std::memcpy(p_, e.bytes, sizeof(e.bytes));
    p_ += e.size;
  }
  // Varint fields as an Encoded: two fit, of field numbers below 16 (a one-byte tag).
  static Encoded uints(std::initializer_list<std::pair<uint32_t, uint64_t>> fields) {
    Encoded e;
    ProtoRaw raw(e.bytes);
    for (auto [field, v] : fields) raw.uint(field, v);
    e.size = static_cast<uint8_t>(raw.pos() - e.bytes);
    return e;
  }
  void uint(uint32_t field, uint64_t v) {
    p_ = Proto::put_varint(Proto::put_varint(p_, uint64_t{field} << 3), v);
  }
  // A field in two steps: its key, then its value (a key encoded beforehand, then this).
  void key(uint32_t field, uint32_t wire) {
    p_ = Proto::put_varint(p_, uint64_t{field} << 3 | wire);
  }
  void varint(uint64_t v) { p_ = Proto::put_varint(p_, v); }
  void fixed64(uint64_t bits) {
    std::memcpy(p_, &bits, 8);
    p_ += 8;
  }
  void length_delimited(std::string_view s) {
    p_ = Proto::put_varint(p_, s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void fixed64(uint32_t field, uint64_t bits) {
    p_ = Proto::put_varint(p_, uint64_t{field} << 3 | 1);
    std::memcpy(p_, &bits, 8);
    p_ += 8;
  }
  void raw_bytes(uint32_t field, std::string_view s) {
    p_ = Proto::put_varint(Proto::put_varint(p_, uint64_t{field} << 3 | 2), s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  char* begin(uint32_t field) {
    p_ = Proto::put_varint(p_, uint64_t{field} << 3 | 2);
    return p_++;
  }
  void end(char* at) {
    const auto len = static_cast<size_t>(p_ - at - 1);
    if (len < 0x80) {
      *at = static_cast<char>(len);
      return;
    }
    const size_t extra = len < (1u << 14) ? 1 : 2;
    std::memmove(at + 1 + extra, at + 1, len);
    Proto::put_varint(at, len);
    p_ += extra;
  }

 private:
  char* p_;
};

}  // namespace nanotrace::exporter
