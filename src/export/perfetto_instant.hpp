// The Perfetto exporter's fast path for a record's DebugAnnotations (perfetto_writer.cc):
// the field of DebugAnnotation a value goes to follows from its event's field type, which
// every record of the event shares, so the annotation's name_iid and value key are encoded
// once per event (AnnotationPlan) and only the value is encoded per record (write_value),
// from a decoded Record or straight from the record's bytes (read_slot).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/utf8.hpp"
#include "export/protobuf_writer.hpp"
#include "nanotrace/abi.hpp"
#include "nanotrace/detail/record_layout.hpp"

namespace nanotrace::exporter {

enum class ValueKind : uint8_t { kVarint, kBool, kFixed64, kString };

struct AnnotationPlan {
  ProtoRaw::Encoded head;  // name_iid, then the key of the value's field
  ValueKind kind = ValueKind::kVarint;
};

// The plan of a field of this type: the same value fields as the exporter's
// annotation_value() writes for a value of the type (int_value for signed integers,
// uint_value for unsigned ones, double_value, bool_value, string_value, pointer_value).
inline AnnotationPlan annotation_plan(uint64_t name_iid, abi::FieldType type) {
  AnnotationPlan plan;
  ProtoRaw raw(plan.head.bytes);
  raw.uint(1, name_iid);
  switch (type) {
    case abi::FieldType::kI8:
    case abi::FieldType::kI16:
    case abi::FieldType::kI32:
    case abi::FieldType::kI64:
      raw.key(4, 0);
      break;
    case abi::FieldType::kF32:
    case abi::FieldType::kF64:
      raw.key(5, 1);
      plan.kind = ValueKind::kFixed64;
      break;
    case abi::FieldType::kBool:
      raw.key(2, 0);
      plan.kind = ValueKind::kBool;
      break;
    case abi::FieldType::kString:
      raw.key(6, 2);
      plan.kind = ValueKind::kString;
      break;
    case abi::FieldType::kPointer:
      raw.key(7, 0);
      break;
    default:
      raw.key(3, 0);
  }
  plan.head.size = static_cast<uint8_t>(raw.pos() - plan.head.bytes);
  return plan;
}

// The value after its plan's head: bits (FieldValue::bits) or text (a string's).
// repaired: scratch for text that is not valid UTF-8 (protobuf strings must be).
inline void write_value(ValueKind kind, uint64_t bits, std::string_view text, ProtoRaw& raw,
                        std::string* repaired) {
  switch (kind) {
    case ValueKind::kVarint:
      return raw.varint(bits);
    case ValueKind::kBool:
      return raw.varint(bits != 0);
    case ValueKind::kFixed64:
      return raw.fixed64(bits);
    case ValueKind::kString:
      if (utf8::is_valid(text)) return raw.length_delimited(text);
      *repaired = utf8::valid(text);
      return raw.length_delimited(*repaired);
  }
}

// Reads the field at *at of a record's bytes (checked against its event's layout), as
// decode_record would decode it, and moves *at past its slot: a scalar's 8 bytes (*bits) or
// a string's length byte, text (*text) and padding.
inline void read_slot(const uint8_t* record, ValueKind kind, uint32_t* at, uint64_t* bits,
                      std::string_view* text) {
  const uint8_t* p = record + *at;
  if (kind == ValueKind::kString) {
    *text = std::string_view(reinterpret_cast<const char*>(p + 1), p[0]);
    *at += abi::string_slot_bytes(p[0]);
    return;
  }
  std::memcpy(bits, p, 8);
  *at += abi::kScalarSlotBytes;
}

}  // namespace nanotrace::exporter
