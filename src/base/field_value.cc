// A record field's value as a number, and field type names (nanotrace/field_value.hpp).
#include "nanotrace/field_value.hpp"

#include <cstring>

namespace nanotrace {

double FieldValue::as_double() const {
  if (type == abi::FieldType::kF32 || type == abi::FieldType::kF64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  if (type >= abi::FieldType::kI8 && type <= abi::FieldType::kI64) {
    return static_cast<double>(static_cast<int64_t>(bits));
  }
  return static_cast<double>(bits);
}

const char* field_type_name(abi::FieldType t) {
  using abi::FieldType;
  switch (t) {
    case FieldType::kI8:
      return "i8";
    case FieldType::kI16:
      return "i16";
    case FieldType::kI32:
      return "i32";
    case FieldType::kI64:
      return "i64";
    case FieldType::kU8:
      return "u8";
    case FieldType::kU16:
      return "u16";
    case FieldType::kU32:
      return "u32";
    case FieldType::kU64:
      return "u64";
    case FieldType::kF32:
      return "f32";
    case FieldType::kF64:
      return "f64";
    case FieldType::kBool:
      return "bool";
    case FieldType::kString:
      return "string";
    case FieldType::kPointer:
      return "pointer";
    default:
      return "none";
  }
}

}  // namespace nanotrace
