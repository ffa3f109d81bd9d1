// Turning record fields into text: single values, and a record's format with its
// placeholders filled ("req={} len={}" -> "req=7 len=4096").
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "nanotrace/reader.hpp"

namespace nanotrace {

std::string format_value(const FieldValue& v) {
  using abi::FieldType;
  switch (v.type) {
    case FieldType::kI8:
    case FieldType::kI16:
    case FieldType::kI32:
    case FieldType::kI64:
      return fmt::format("{}", static_cast<int64_t>(v.bits));
    case FieldType::kF32:
    case FieldType::kF64:
      return fmt::format("{}", v.as_double());
    case FieldType::kBool:
      return v.bits ? "true" : "false";
    case FieldType::kString:
      return std::string(v.text);
    case FieldType::kPointer:
      return fmt::format("0x{:x}", v.bits);
    default:
      return fmt::format("{}", v.bits);
  }
}

FieldValue named_value(const FieldInfo& field, const FieldValue& value) {
  const std::string* name = field.name_of(value.bits);
  if (name == nullptr) return value;
  FieldValue named;
  named.type = abi::FieldType::kString;
  named.text = *name;
  return named;
}

std::string format_fields(const Record& r) {
  std::string out;
  const std::string& f = r.event->format;
  uint32_t field = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '}') {
      if (field < r.field_count) out += format_value(display_value(r, field));
      ++field;
      ++i;
    } else {
      out += f[i];
    }
  }
  return out;
}

const char* mode_name(abi::Mode m) {
  switch (m) {
    case abi::Mode::kOverwrite:
      return "overwrite";
    case abi::Mode::kDiscard:
      return "discard";
    case abi::Mode::kBlock:
      return "block";
  }
  return "unknown";
}

const char* trigger_state_name(abi::TriggerState state) {
  switch (state) {
    case abi::TriggerState::kNone:
      return "none";
    case abi::TriggerState::kArmed:
      return "armed";
    case abi::TriggerState::kFired:
      return "fired";
    case abi::TriggerState::kFrozen:
      return "frozen";
  }
  return "unknown";
}

const char* process_state_name(abi::ProcessState state) {
  switch (state) {
    case abi::ProcessState::kRunning:
      return "running";
    case abi::ProcessState::kExited:
      return "exited";
    case abi::ProcessState::kCrashed:
      return "crashed";
  }
  return "unknown";
}

}  // namespace nanotrace
