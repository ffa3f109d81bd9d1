// A record field's value as a number. Kept below the reader because the runtime's trigger
// compares field values too, and the runtime must not link the reader.
#include <cstring>

#include "nanotrace/reader.hpp"

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

}  // namespace nanotrace
