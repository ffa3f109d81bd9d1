// Trigger expressions. A record trigger is "group:event" optionally followed by conditions on
// the event's fields, joined by "&&": `io:error`, `io:complete lat_us>1000`,
// `io:submit dev==nvme1n1 && len>=65536`. A duration trigger pairs a begin event with an end
// event by a key and fires on how long the operation took or has been open:
// `io:submit..io:complete by req > 5ms` (slow: the end record of a pair longer than 5 ms),
// `io:submit..io:complete by req open > 50ms` (stuck: an operation still open after 50 ms),
// `io:submit..io:complete by req > 10 x p99` (relative to the recent pairs), with options
// `cap 3 per 10s`, `cooldown 1s`, `over 10s`, `warmup 1000`.
// The same syntax serves in-process triggers (NANOTRACE_TRIGGER, `nanotrace arm`), the
// recorder's --stop-on / --snapshot-on and `fleet arm`. The grammar, how each kind of value
// compares and the window after a match: docs/reference/triggers.md.
//
// Thread safety: values; Trigger::matches is const and may run on any thread.
#pragma once

#include <cstdint>
#include <optional>
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

// How many fires a trigger may have: at most `cap` within any `per_ns`, and none within
// `cooldown_ns` of the last one (0: no limit). Fires held back are counted, not lost.
struct FireLimits {
  uint32_t cap = 0;
  uint64_t per_ns = 0;
  uint64_t cooldown_ns = 0;
  bool limited() const { return cap != 0 || cooldown_ns != 0; }
};

// The pair rule and threshold of a duration trigger.
struct DurationRule {
  std::string begin_group, begin_event;
  std::string end_group, end_event;
  std::vector<std::string> key;  // the key's fields ("dev+sector": two), in both events
  bool open = false;             // stuck: fires on an operation still open past the threshold
  // Fixed threshold (factor 0), or `factor` times the `percentile` of the pairs of the last
  // `window_ns`, once that window holds `warmup` pairs.
  uint64_t threshold_ns = 0;
  double factor = 0;
  double percentile = 0;
  uint64_t window_ns = 10'000'000'000;
  uint64_t warmup = 1000;
  FireLimits limits;

  bool adaptive() const { return factor > 0; }
  std::string begin_name() const { return begin_group + ":" + begin_event; }
  std::string end_name() const { return end_group + ":" + end_event; }
  std::string key_text() const;        // "req", "dev+sector"
  std::string threshold_text() const;  // "5ms", "10 x p99"
  // The index of each key field among an event's fields, or an error naming the event and
  // the missing field. A stored name may carry value names after a colon.
  Result<std::vector<uint32_t>> bind_key(const std::string& event_name,
                                         const std::vector<std::string>& field_names) const;
};

struct Trigger {
  // The event whose record is the match: a record trigger's event; a duration trigger's end
  // event (slow) or begin event (stuck, whose match is the open operation's begin record).
  std::string group;
  std::string event;
  std::optional<DurationRule> duration;  // set for a duration trigger (no conditions then)
  std::vector<TriggerCondition> conditions;
  std::string text;  // the expression as written

  // A post-trigger window: "1000" (events), "500us", "2ms", "1s", "250ns" (time).
  // False if malformed.
  static bool parse_window(const std::string& text, uint64_t* events, uint64_t* ns);
  // A duration: a number (decimals allowed) and a unit ns, us, ms, s, m (or min) or h:
  // "2.5ms", "10m". False if malformed or beyond 2^63 ns.
  static bool parse_duration(std::string_view text, uint64_t* ns);

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
