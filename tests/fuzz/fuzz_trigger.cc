// libFuzzer target for the trigger grammar (nanotrace/trigger.hpp), whose text arrives from
// the environment, the command line and other nodes' fleet messages. The input is lines:
//   expression \n window \n field bytes...
// Trigger::parse must refuse or accept without crashing; an accepted expression parses again
// from its own text to the same trigger (the fleet forwards the text). parse_window accepts
// exactly 1 to 18 digits with a known unit whose value fits in 64 bits. bind() against fields
// named after the conditions (types from the field bytes) returns indexes of those fields, and
// matches() on values from the field bytes agrees with an exact comparison: integers as 128-bit
// values, decimals and float fields as doubles, strings byte by byte. A duration trigger
// (`a:b..c:d by key [open] > threshold [options]`) is checked against its documented bounds,
// parses again to the same rule from its text and from what `status` shows of it (the key and
// threshold as rendered), and binds its key to the fields named after it; the window line is
// also read as a duration (parse_duration) and checked against an exact computation.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/trigger.hpp"

namespace {

using nanotrace::DurationRule;
using nanotrace::FieldValue;
using nanotrace::Trigger;
using nanotrace::TriggerCondition;
using nanotrace::abi::FieldType;

#define FUZZ_CHECK(cond)                                                 \
  do {                                                                   \
    if (!(cond)) {                                                       \
      __builtin_printf("check failed: %s (line %d)\n", #cond, __LINE__); \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

std::string_view next_line(std::string_view* rest) {
  size_t nl = rest->find('\n');
  std::string_view line = rest->substr(0, nl);
  *rest = nl == std::string_view::npos ? std::string_view() : rest->substr(nl + 1);
  return line;
}

// Bytes consumed from the tail of the input, zero once it runs out.
struct Bytes {
  std::string_view data;
  uint8_t byte() {
    if (data.empty()) return 0;
    uint8_t b = static_cast<uint8_t>(data.front());
    data.remove_prefix(1);
    return b;
  }
  uint64_t word() {
    uint64_t w = 0;
    for (int i = 0; i < 8; ++i) w = w << 8 | byte();
    return w;
  }
};

bool same_condition(const TriggerCondition& a, const TriggerCondition& b) {
  return a.field == b.field && a.op == b.op && a.text == b.text && a.is_number == b.is_number &&
         a.is_integer == b.is_integer && a.negative == b.negative && a.magnitude == b.magnitude &&
         a.range_error == b.range_error && std::memcmp(&a.number, &b.number, sizeof(double)) == 0;
}

void check_window(std::string_view text) {
  uint64_t events = 1, ns = 1;
  const bool ok = Trigger::parse_window(std::string(text), &events, &ns);
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit = text.substr(digits);
  uint64_t scale = 0;
  if (unit.empty() || unit == "events" || unit == "ns") scale = 1;
  if (unit == "us") scale = 1000;
  if (unit == "ms") scale = 1000000;
  if (unit == "s") scale = 1000000000;
  unsigned __int128 value = 0;
  for (size_t i = 0; i < digits; ++i) value = value * 10 + static_cast<unsigned>(text[i] - '0');
  const bool fits = value * scale <= UINT64_MAX;
  FUZZ_CHECK(ok == (digits >= 1 && digits <= 18 && scale != 0 && fits));
  if (!ok) return;
  const bool is_events = unit.empty() || unit == "events";
  FUZZ_CHECK(events == (is_events ? static_cast<uint64_t>(value) : 0));
  FUZZ_CHECK(ns == (is_events ? 0 : static_cast<uint64_t>(value * scale)));
}

// parse_duration: a number of digits and dots then a unit of ns, us, ms, s, m, min or h, within
// 2^63 ns. An integer whose value in ns is exact in a double must come out exactly.
void check_duration_text(std::string_view text) {
  uint64_t ns = 0;
  const bool ok = Trigger::parse_duration(text, &ns);
  size_t unit = 0;
  while (unit < text.size() && ((text[unit] >= '0' && text[unit] <= '9') || text[unit] == '.')) {
    ++unit;
  }
  const std::string_view number = text.substr(0, unit), u = text.substr(unit);
  const bool known_unit =
      u == "ns" || u == "us" || u == "ms" || u == "s" || u == "m" || u == "min" || u == "h";
  if (!known_unit || number.empty() || number.size() > 24) {
    FUZZ_CHECK(!ok);
    return;
  }
  if (ok) FUZZ_CHECK(ns < (uint64_t{1} << 63));
  if (number.find('.') != std::string_view::npos || number.size() > 15) return;
  const uint64_t scale = u == "ns"   ? 1
                         : u == "us" ? 1000
                         : u == "ms" ? 1000000
                         : u == "s"  ? 1000000000
                         : u == "h"  ? 3600000000000
                                     : 60000000000;
  const unsigned __int128 value = std::strtoull(std::string(number).c_str(), nullptr, 10);
  if (value * scale >= (uint64_t{1} << 53)) return;
  FUZZ_CHECK(ok);
  FUZZ_CHECK(ns == static_cast<uint64_t>(value * scale));
}

bool same_rule(const DurationRule& a, const DurationRule& b) {
  return a.begin_group == b.begin_group && a.begin_event == b.begin_event &&
         a.end_group == b.end_group && a.end_event == b.end_event && a.key == b.key &&
         a.open == b.open && a.threshold_ns == b.threshold_ns &&
         std::memcmp(&a.factor, &b.factor, sizeof(double)) == 0 &&
         std::memcmp(&a.percentile, &b.percentile, sizeof(double)) == 0 &&
         a.window_ns == b.window_ns && a.warmup == b.warmup && a.limits.cap == b.limits.cap &&
         a.limits.per_ns == b.limits.per_ns && a.limits.cooldown_ns == b.limits.cooldown_ns;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  }
  return true;
}

// A duration trigger: its bounds (docs/reference/triggers.md), the same rule from its text
// and from its rendering, and its key bound to fields named after it.
void check_duration(const Trigger& t, Bytes bytes) {
  const DurationRule& d = *t.duration;
  FUZZ_CHECK(t.conditions.empty());
  FUZZ_CHECK(is_identifier(d.begin_group) && is_identifier(d.begin_event));
  FUZZ_CHECK(is_identifier(d.end_group) && is_identifier(d.end_event));
  FUZZ_CHECK(d.begin_name() != d.end_name());
  // The match is the end record of a slow pair, the begin record of a stuck operation.
  FUZZ_CHECK(t.group == (d.open ? d.begin_group : d.end_group));
  FUZZ_CHECK(t.event == (d.open ? d.begin_event : d.end_event));
  FUZZ_CHECK(!d.key.empty());
  for (const std::string& k : d.key) FUZZ_CHECK(is_identifier(k) && k.find('+') == k.npos);
  if (d.adaptive()) {
    FUZZ_CHECK(d.factor > 0 && d.factor <= 1e6 && d.percentile > 0 && d.percentile < 100);
    FUZZ_CHECK(d.threshold_ns == 0 && d.window_ns >= 10000000);
    FUZZ_CHECK(d.warmup >= 1 && d.warmup <= uint64_t{1} << 40);
  } else {
    FUZZ_CHECK(d.threshold_ns < (uint64_t{1} << 63));
    FUZZ_CHECK(d.window_ns == 10000000000 && d.warmup == 1000);  // the defaults: not options
  }
  FUZZ_CHECK(d.limits.cap <= 1000000);
  FUZZ_CHECK((d.limits.cap == 0) == (d.limits.per_ns == 0));
  FUZZ_CHECK(d.limits.limited() == (d.limits.cap != 0 || d.limits.cooldown_ns != 0));
  auto again = Trigger::parse(t.text);
  FUZZ_CHECK(again.ok() && again->duration && same_rule(*again->duration, d));
  FUZZ_CHECK(again->group == t.group && again->event == t.event);
  // What `status` shows (key and threshold rendered) arms the same trigger: exactly for a
  // fixed threshold, to the rendering's six digits for a relative one.
  std::string shown = d.begin_name() + ".." + d.end_name() + " by " + d.key_text() +
                      (d.open ? " open" : "") + " > " + d.threshold_text();
  auto rendered = Trigger::parse(shown);
  FUZZ_CHECK(rendered.ok() && rendered->duration);
  const DurationRule& r = *rendered->duration;
  FUZZ_CHECK(r.key == d.key && r.open == d.open && r.adaptive() == d.adaptive());
  if (d.adaptive()) {
    FUZZ_CHECK(std::fabs(r.factor - d.factor) <= 1e-5 * d.factor);
    FUZZ_CHECK(std::fabs(r.percentile - d.percentile) <= 1e-5 * d.percentile);
  } else {
    FUZZ_CHECK(r.threshold_ns == d.threshold_ns);
  }
  // The key bound to an event's fields: each index names a field of that key, or an error.
  std::vector<std::string> names{"decoy"};
  for (const std::string& k : d.key) {
    const uint8_t b = bytes.byte();
    if (b % 7 == 6) continue;  // a field the event lacks
    names.push_back((b & 0x80) ? k + ":0=zero" : k);
  }
  auto index = d.bind_key(d.begin_name(), names);
  if (!index.ok()) {
    FUZZ_CHECK(!index.status().message().empty());
    return;
  }
  FUZZ_CHECK(index->size() == d.key.size());
  for (size_t k = 0; k < d.key.size(); ++k) {
    FUZZ_CHECK((*index)[k] < names.size());
    FUZZ_CHECK(names[(*index)[k]].substr(0, names[(*index)[k]].find(':')) == d.key[k]);
  }
}

bool is_signed(FieldType t) { return t >= FieldType::kI8 && t <= FieldType::kI64; }
bool is_float(FieldType t) { return t == FieldType::kF32 || t == FieldType::kF64; }

// A value of `type` as a record holds it: integers sign- or zero-extended from their width.
FieldValue make_value(FieldType type, Bytes* bytes, std::string* text) {
  FieldValue v;
  v.type = type;
  uint64_t w = bytes->word();
  static const int kBits[] = {64, 8, 16, 32, 64, 8, 16, 32, 64, 64, 64, 1, 64, 64};
  const int bits = kBits[static_cast<int>(type)];
  if (type == FieldType::kString) {
    const size_t n = bytes->byte() % 16;
    text->clear();
    for (size_t i = 0; i < n; ++i) text->push_back(static_cast<char>(bytes->byte()));
    v.text = *text;
    v.bits = 0;
  } else if (type == FieldType::kF32) {
    float f;
    uint32_t low = static_cast<uint32_t>(w);
    std::memcpy(&f, &low, 4);
    double d = f;
    std::memcpy(&v.bits, &d, 8);
  } else if (bits < 64) {
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    w &= mask;
    if (is_signed(type) && (w >> (bits - 1)) != 0) w |= ~mask;
    v.bits = w;
  } else {
    v.bits = w;
  }
  return v;
}

template <class T>
bool compare(T a, TriggerCondition::Op op, T b) {
  switch (op) {
    case TriggerCondition::Op::kEq:
      return a == b;
    case TriggerCondition::Op::kNe:
      return a != b;
    case TriggerCondition::Op::kLt:
      return a < b;
    case TriggerCondition::Op::kLe:
      return a <= b;
    case TriggerCondition::Op::kGt:
      return a > b;
    case TriggerCondition::Op::kGe:
      return a >= b;
  }
  std::abort();
}

// What the documentation says a condition means (docs/reference/triggers.md).
bool expected_match(const TriggerCondition& c, const FieldValue& v) {
  if (v.type == FieldType::kString) return compare<std::string_view>(v.text, c.op, c.text);
  if (!c.is_integer || is_float(v.type)) return compare<double>(v.as_double(), c.op, c.number);
  const __int128 value = is_signed(v.type) ? __int128{static_cast<int64_t>(v.bits)}
                                           : __int128{static_cast<uint64_t>(v.bits)};
  const __int128 constant = c.negative ? -__int128{c.magnitude} : __int128{c.magnitude};
  return compare<__int128>(value, c.op, constant);
}

void check_bind_and_match(const Trigger& t, Bytes bytes) {
  // One field per distinct condition field, each of a type from the bytes, and a decoy whose
  // stored name carries value names ("name:0=a") as enum fields' do.
  std::vector<std::string> names;
  std::vector<FieldType> types;
  for (const TriggerCondition& c : t.conditions) {
    bool known = false;
    for (const std::string& n : names) known = known || n.substr(0, n.find(':')) == c.field;
    if (known || names.size() + 1 >= nanotrace::abi::kMaxFields) continue;
    const uint8_t b = bytes.byte();
    if (b % 7 == 6) continue;  // a field the event lacks
    names.push_back((b & 0x80) ? c.field + ":0=zero,1=one" : c.field);
    types.push_back(static_cast<FieldType>(1 + bytes.byte() % 13));
  }
  names.push_back("decoy");
  types.push_back(FieldType::kU64);
  auto index = t.bind(names, types);
  if (!index.ok()) return;
  FUZZ_CHECK(index->size() == t.conditions.size());
  for (size_t k = 0; k < index->size(); ++k) {
    const uint32_t i = (*index)[k];
    FUZZ_CHECK(i < names.size());
    FUZZ_CHECK(names[i].substr(0, names[i].find(':')) == t.conditions[k].field);
  }
  FieldValue values[nanotrace::abi::kMaxFields];
  std::string texts[nanotrace::abi::kMaxFields];
  for (int round = 0; round < 4; ++round) {
    for (size_t i = 0; i < names.size(); ++i) values[i] = make_value(types[i], &bytes, &texts[i]);
    bool expected = true;
    for (size_t k = 0; k < index->size(); ++k) {
      expected = expected && expected_match(t.conditions[k], values[(*index)[k]]);
    }
    FUZZ_CHECK(t.matches(*index, values) == expected);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view expression = next_line(&rest);
  const std::string_view window = next_line(&rest);
  check_window(window);
  check_duration_text(window);
  auto parsed = Trigger::parse(expression);
  if (!parsed.ok()) {
    FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  const Trigger& t = *parsed;
  FUZZ_CHECK(!t.group.empty() && !t.event.empty());
  if (t.duration) {
    check_duration(t, Bytes{rest});
    return 0;
  }
  auto again = Trigger::parse(t.text);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->text == t.text && again->group == t.group && again->event == t.event);
  FUZZ_CHECK(again->conditions.size() == t.conditions.size());
  for (size_t k = 0; k < t.conditions.size(); ++k) {
    const TriggerCondition& c = t.conditions[k];
    FUZZ_CHECK(same_condition(c, again->conditions[k]));
    FUZZ_CHECK(!c.field.empty() && !c.text.empty());
    FUZZ_CHECK(!c.is_integer || c.is_number);
    FUZZ_CHECK(c.range_error.empty() || !c.is_number);
    // A number is the whole text: nothing after it, not even past a NUL byte.
    if (c.is_number) FUZZ_CHECK(c.text.find('\0') == std::string::npos);
  }
  check_bind_and_match(t, Bytes{rest});
  return 0;
}
