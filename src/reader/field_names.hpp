// Reading a field's stored name, which for an enum field with value names also carries them
// ("backend:0=sync,1=uring-ready"; docs/format.md, "Enum fields"). Internal header.
#pragma once

#include <string>

#include "nanotrace/reader.hpp"

namespace nanotrace::reader {

// The field's name and value names from its stored name. Untrusted input: a malformed list
// of value names is dropped whole (the field then prints numbers), never half-read.
FieldInfo field_info(const std::string& stored_name, abi::FieldType type);

}  // namespace nanotrace::reader
