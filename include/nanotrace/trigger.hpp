// Trigger expressions: "group:event" optionally followed by conditions on the event's fields,
// joined by "&&": `io:error`, `io:complete lat_us>1000`, `io:submit dev==nvme1n1 && len>=65536`.
// The same syntax serves in-process triggers (NANOTRACE_TRIGGER, `nanotrace arm`), the
// recorder's --stop-on / --snapshot-on and `fleet arm`. The grammar, how each kind of value
// compares and the window after a match: docs/reference/triggers.md.
//
// Thread safety: values; Trigger::matches is const and may run on any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/abi.hpp"
#include "nanotrace/field_value.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

struct TriggerCondition {
  enum class Op { kEq, kNe, kLt, kLe, kGt, kGe };
  std::string field;
  Op op = Op::kEq;
  std::string text;   // the value as written
  double number = 0;  // the value as a number, when it is one
  bool is_number = false;
  // An integer constant (true/false are 1/0): exactly -magnitude or +magnitude.
  bool is_integer = false;
  bool negative = false;
  uint64_t magnitude = 0;
  // Why the value is no usable number (out of range), reported by bind() unless the field
  // is a string (which compares the text as written).
  std::string range_error;
};

struct Trigger {
  std::string group;
  std::string event;
  std::vector<TriggerCondition> conditions;
  std::string text;  // the expression as written

  // A post-trigger window: "1000" (events), "500us", "2ms", "1s", "250ns" (time).
  // False if malformed.
  static bool parse_window(const std::string& text, uint64_t* events, uint64_t* ns);

  // Parses an expression; kInvalidArgument with the reason if malformed.
  static Result<Trigger> parse(std::string_view text);

  // Field index of each condition for an event with these field names and types, or an
  // error naming the unknown field / type mismatch.
  Result<std::vector<uint32_t>> bind(const std::vector<std::string>& field_names,
                                     const std::vector<abi::FieldType>& field_types) const;

  // True if the values satisfy every condition. REQUIRES: field_index from bind().
  bool matches(const std::vector<uint32_t>& field_index, const FieldValue* values) const;
};

}  // namespace nanotrace
