// The one rule that sizes and decodes a record (docs/format.md, "Rings, blocks and records"):
// word0, then per field an 8-byte slot for a scalar, or for a string one length byte
// n <= kMaxStringBytes, the n bytes and zero padding to a multiple of 8. The runtime writes
// records by it (detail/fields.hpp); the reader, the recorder, the CTF exporter and the
// trigger runtime read them by it. Header-only, so that the runtime, which links no reader,
// uses the same code.
//
// Every byte read is untrusted: a record is malformed (size 0) when a string's length is over
// kMaxStringBytes or a slot would end past the bytes given.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "nanotrace/abi.hpp"

namespace nanotrace::abi {

inline constexpr uint32_t kWord0Bytes = 8;
inline constexpr uint32_t kScalarSlotBytes = 8;

// How the records of one event are laid out, from its field types. Sizing has three shapes,
// for speed: a fixed size (no string), fixed bytes plus one string slot (one length byte to
// read, no loop), and several string slots.
class RecordLayout {
 public:
  // No event: every record is malformed.
  constexpr RecordLayout() = default;
  // REQUIRES: count <= kMaxFields.
  constexpr RecordLayout(const FieldType* types, uint32_t count) {
    kind_ = Kind::kFixed;
    field_count_ = static_cast<uint8_t>(count);
    uint32_t scalars = 0, since_string = 0, first_string_at = 0;
    for (uint32_t f = 0; f < count; ++f) {
      types_[f] = types[f];
      if (types[f] == FieldType::kString) {
        if (strings_ == 0) first_string_at = kWord0Bytes + kScalarSlotBytes * since_string;
        scalars_before_[strings_++] = static_cast<uint8_t>(since_string);
        string_mask_ = static_cast<uint16_t>(string_mask_ | 1u << f);
        since_string = 0;
      } else {
        ++scalars;
        ++since_string;
      }
    }
    scalars_after_ = static_cast<uint8_t>(since_string);
    bytes_ = kWord0Bytes + kScalarSlotBytes * scalars;
    if (strings_ == 1) {
      kind_ = Kind::kOneString;
      string_at_ = static_cast<uint16_t>(first_string_at);
    } else if (strings_ > 1) {
      kind_ = Kind::kStrings;
    }
  }

  constexpr bool valid() const { return kind_ != Kind::kInvalid; }
  // The size of every record of a layout without strings; 0 if it has strings.
  constexpr uint32_t fixed_size() const { return kind_ == Kind::kFixed ? bytes_ : 0; }
  constexpr uint32_t field_count() const { return field_count_; }
  constexpr FieldType type(uint32_t field) const { return types_[field]; }

  // Size of the record at buf[offset, limit), or 0 if it is malformed. REQUIRES: offset + 8
  // <= limit (word0 is there).
  uint32_t size(const uint8_t* buf, uint32_t offset, uint32_t limit) const {
    return strings(buf, offset, limit, [](std::string_view) {});
  }

  // size(), calling text(string) with each string field's text on the way, in field order.
  template <class Text>
  uint32_t strings(const uint8_t* buf, uint32_t offset, uint32_t limit, Text&& text) const {
    if (kind_ == Kind::kFixed) return bytes_ <= limit - offset ? bytes_ : 0;
    if (kind_ == Kind::kOneString) {
      // The most common variable layout, without a loop: one length byte moves the end.
      const uint32_t at = offset + string_at_;  // below limit + 8 * kMaxFields: no overflow
      if (at >= limit) return 0;
      const uint32_t n = buf[at];
      if (n > kMaxStringBytes) return 0;
      const uint32_t size = bytes_ + string_slot_bytes(n);
      if (size > limit - offset) return 0;
      text(std::string_view(reinterpret_cast<const char*>(buf + at + 1), n));
      return size;
    }
    if (kind_ != Kind::kStrings) return 0;
    uint32_t at = offset + kWord0Bytes;  // at most limit + 8 * kMaxFields: no overflow
    for (uint32_t s = 0; s < strings_; ++s) {
      at += kScalarSlotBytes * scalars_before_[s];
      if (at >= limit) return 0;
      const uint32_t n = buf[at];
      if (n > kMaxStringBytes || string_slot_bytes(n) > limit - at) return 0;
      text(std::string_view(reinterpret_cast<const char*>(buf + at + 1), n));
      at += string_slot_bytes(n);
    }
    at += kScalarSlotBytes * scalars_after_;
    return at <= limit ? at - offset : 0;
  }

  // Decodes the record at buf[offset, limit) field by field: scalar(field, bits) for a
  // scalar's 8 bytes, string(field, text) for a string. Returns the record's size, or 0 if it
  // is malformed (fields before the fault may have been visited). REQUIRES: offset + 8 <=
  // limit.
  template <class Scalar, class String>
  uint32_t decode(const uint8_t* buf, uint32_t offset, uint32_t limit, Scalar&& scalar,
                  String&& string) const {
    if (kind_ == Kind::kInvalid) return 0;
    uint32_t at = offset + kWord0Bytes;
    // In locals: the callbacks' stores into bytes could otherwise alias them, and they would
    // be loaded again for each field.
    const uint32_t count = field_count_;
    const uint32_t string_mask = string_mask_;
    if (kind_ == Kind::kFixed) {  // one bound check for the whole record
      const uint32_t bytes = bytes_;
      if (bytes > limit - offset) return 0;
      for (uint32_t f = 0; f < count; ++f, at += kScalarSlotBytes) {
        uint64_t bits;
        std::memcpy(&bits, buf + at, 8);
        scalar(f, bits);
      }
      return bytes;
    }
    // at <= limit from here on (checked once: a caller's word0 is within the bytes given), and
    // each slot below ends at or before limit.
    if (at > limit) return 0;
    for (uint32_t f = 0; f < count; ++f) {
      if (string_mask >> f & 1) {
        if (at >= limit) return 0;
        const uint32_t n = buf[at];
        const uint32_t slot = string_slot_bytes(n);
        if (n > kMaxStringBytes || slot > limit - at) return 0;
        string(f, std::string_view(reinterpret_cast<const char*>(buf + at + 1), n));
        at += slot;
      } else {
        if (limit - at < kScalarSlotBytes) return 0;
        uint64_t bits;
        std::memcpy(&bits, buf + at, 8);
        scalar(f, bits);
        at += kScalarSlotBytes;
      }
    }
    return at - offset;
  }

 private:
  enum class Kind : uint8_t { kInvalid, kFixed, kOneString, kStrings };

  // The sizing shape first: one load for the common layouts.
  uint32_t bytes_ = 0;      // kFixed: the size; otherwise word0 and the scalar slots
  uint16_t string_at_ = 0;  // kOneString: the string's length byte, from the record's start
  Kind kind_ = Kind::kInvalid;
  uint8_t field_count_ = 0;
  uint16_t string_mask_ = 0;  // bit f: field f is a string
  uint8_t strings_ = 0;
  uint8_t scalars_after_ = 0;                // scalar slots after the last string
  uint8_t scalars_before_[kMaxFields] = {};  // scalar slots before each string
  FieldType types_[kMaxFields] = {};
};

}  // namespace nanotrace::abi
