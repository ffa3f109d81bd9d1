// One field value of a record, and the names of field types. Below the reader: the
// runtime's trigger compares field values too, and the traced program must not compile
// against the reader's API.
#pragma once

#include <cstdint>
#include <string_view>

#include "nanotrace/abi.hpp"

namespace nanotrace {

// One field value of a record. Strings point into the reader's buffer: valid until the
// reader's next call.
struct FieldValue {
  abi::FieldType type = abi::FieldType::kNone;
  uint64_t bits = 0;  // integer bits (signed values sign-extended), double bits, bool 0/1
  std::string_view text;
  int64_t as_int() const { return static_cast<int64_t>(bits); }
  double as_double() const;
};

// "i8", "u64", "string", ...; "none" for a type that is none of them.
const char* field_type_name(abi::FieldType type);

}  // namespace nanotrace
