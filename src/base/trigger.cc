// Parsing and evaluating trigger expressions (see nanotrace/trigger.hpp).
#include "nanotrace/trigger.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace nanotrace {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_ident(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  }
  return true;
}

// An integer literal: optional sign, then decimal digits or 0x and hex digits.
enum class IntegerParse { kNotInteger, kOk, kTooLarge };
IntegerParse parse_integer(std::string_view s, bool* negative, uint64_t* magnitude) {
  *negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty() || !std::isxdigit(static_cast<unsigned char>(s[0]))) {
    return IntegerParse::kNotInteger;
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *magnitude, base);
  if (end != s.data() + s.size()) {
    // Digits run on past the number's range, or something else follows (a decimal).
    if (ec != std::errc::result_out_of_range) return IntegerParse::kNotInteger;
  }
  if (ec == std::errc::result_out_of_range) {
    while (end != s.data() + s.size() && std::isxdigit(static_cast<unsigned char>(*end)) &&
           (base == 16 || std::isdigit(static_cast<unsigned char>(*end)))) {
      ++end;
    }
    return end == s.data() + s.size() ? IntegerParse::kTooLarge : IntegerParse::kNotInteger;
  }
  return IntegerParse::kOk;
}

constexpr uint64_t kMinInt64Magnitude = uint64_t{1} << 63;

// The constant's value: an exact integer, or a double; range_error when it is out of range.
void parse_constant(TriggerCondition* c) {
  const std::string& t = c->text;
  if (t == "true" || t == "false") {
    c->is_integer = c->is_number = true;
    c->magnitude = t == "true" ? 1 : 0;
    c->number = static_cast<double>(c->magnitude);
    return;
  }
  switch (parse_integer(t, &c->negative, &c->magnitude)) {
    case IntegerParse::kTooLarge:
      c->range_error = "constant " + t + " is out of range: integers must fit in 64 bits";
      return;
    case IntegerParse::kOk:
      if (c->negative && c->magnitude > kMinInt64Magnitude) {
        c->range_error = "constant " + t +
                         " is out of range: below the smallest 64-bit integer "
                         "-9223372036854775808";
        return;
      }
      c->negative = c->negative && c->magnitude != 0;
      c->is_integer = c->is_number = true;
      c->number = static_cast<double>(c->magnitude) * (c->negative ? -1 : 1);
      return;
    case IntegerParse::kNotInteger:
      break;
  }
  char* end = nullptr;
  errno = 0;
  c->number = std::strtod(t.c_str(), &end);
  // The whole text: strtod stops at a NUL byte, which a fleet message's text may hold.
  c->is_number = end != t.c_str() && end == t.c_str() + t.size();
  if (c->is_number && errno == ERANGE && std::isinf(c->number)) {
    c->is_number = false;
    c->range_error = "constant " + t + " is out of range for a double";
  }
}

Result<TriggerCondition> parse_condition(std::string_view s) {
  static const struct {
    const char* token;
    TriggerCondition::Op op;
  } kOps[] = {{"==", TriggerCondition::Op::kEq}, {"!=", TriggerCondition::Op::kNe},
              {"<=", TriggerCondition::Op::kLe}, {">=", TriggerCondition::Op::kGe},
              {"<", TriggerCondition::Op::kLt},  {">", TriggerCondition::Op::kGt},
              {"=", TriggerCondition::Op::kEq}};
  for (const auto& o : kOps) {
    size_t at = s.find(o.token);
    if (at == std::string_view::npos) continue;
    TriggerCondition c;
    c.field = std::string(trim(s.substr(0, at)));
    c.op = o.op;
    c.text = std::string(trim(s.substr(at + std::strlen(o.token))));
    if (!is_ident(c.field)) return Status::Invalid("bad field name in '" + std::string(s) + "'");
    if (c.text.empty()) return Status::Invalid("missing value in '" + std::string(s) + "'");
    parse_constant(&c);
    return c;
  }
  return Status::Invalid("no operator (== != < <= > >=) in '" + std::string(s) + "'");
}

bool is_signed_integer(abi::FieldType t) {
  return t >= abi::FieldType::kI8 && t <= abi::FieldType::kI64;
}
bool is_unsigned_integer(abi::FieldType t) {
  return t != abi::FieldType::kString && t != abi::FieldType::kF32 && t != abi::FieldType::kF64 &&
         !is_signed_integer(t);
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
  return false;
}

}  // namespace

Result<Trigger> Trigger::parse(std::string_view text) {
  Trigger t;
  t.text = std::string(trim(text));
  std::string_view rest = t.text;
  size_t space = rest.find_first_of(" \t");
  std::string_view name = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view() : trim(rest.substr(space));
  size_t colon = name.find(':');
  if (colon == std::string_view::npos || !is_ident(name.substr(0, colon)) ||
      !is_ident(name.substr(colon + 1))) {
    return Status::Invalid("trigger must start with group:event, got '" + std::string(name) + "'");
  }
  t.group = std::string(name.substr(0, colon));
  t.event = std::string(name.substr(colon + 1));
  while (!rest.empty()) {
    size_t amp = rest.find("&&");
    auto cond = parse_condition(trim(rest.substr(0, amp)));
    if (!cond.ok()) return cond.status();
    t.conditions.push_back(std::move(cond.value()));
    rest = amp == std::string_view::npos ? std::string_view() : trim(rest.substr(amp + 2));
    if (amp != std::string_view::npos && rest.empty()) return Status::Invalid("dangling '&&'");
  }
  return t;
}

Result<std::vector<uint32_t>> Trigger::bind(const std::vector<std::string>& names,
                                            const std::vector<abi::FieldType>& types) const {
  std::vector<uint32_t> index;
  for (const TriggerCondition& c : conditions) {
    // A stored name may carry value names after a colon ("backend:0=sync,..."): the field's
    // name is what precedes it.
    auto field_name = [&](uint32_t i) {
      return std::string_view(names[i]).substr(0, names[i].find(':'));
    };
    uint32_t i = 0;
    while (i < names.size() && field_name(i) != c.field) ++i;
    if (i == names.size()) {
      return Status::NotFound("event " + group + ":" + event + " has no field '" + c.field + "'");
    }
    abi::FieldType type = types[i];
    bool is_string = type == abi::FieldType::kString;
    if (!is_string && !c.range_error.empty()) return Status::Invalid(c.range_error);
    if (!is_string && !c.is_number) {
      return Status::Invalid("field '" + c.field + "' is numeric but '" + c.text + "' is not");
    }
    if (c.is_integer && is_signed_integer(type) && !c.negative &&
        c.magnitude > static_cast<uint64_t>(INT64_MAX)) {
      return Status::Invalid("constant " + c.text + " is out of range for field '" + c.field +
                             "' (" + field_type_name(type) + ": at most 9223372036854775807)");
    }
    if (c.is_integer && is_unsigned_integer(type) && c.negative) {
      return Status::Invalid("constant " + c.text + " is negative but field '" + c.field +
                             "' is unsigned (" + field_type_name(type) + ")");
    }
    index.push_back(i);
  }
  return index;
}

bool Trigger::matches(const std::vector<uint32_t>& field_index, const FieldValue* values) const {
  for (size_t k = 0; k < conditions.size(); ++k) {
    const TriggerCondition& c = conditions[k];
    const FieldValue& v = values[field_index[k]];
    bool ok;
    if (v.type == abi::FieldType::kString) {
      ok = compare<std::string_view>(v.text, c.op, c.text);
    } else if (!c.is_integer || v.type == abi::FieldType::kF32 || v.type == abi::FieldType::kF64) {
      ok = compare<double>(v.as_double(), c.op, c.number);
    } else if (is_signed_integer(v.type)) {
      // Exact: two's complement of the magnitude (bind() keeps it within int64).
      auto constant = static_cast<int64_t>(c.negative ? 0 - c.magnitude : c.magnitude);
      if (!c.negative && c.magnitude > static_cast<uint64_t>(INT64_MAX)) {
        ok = compare<int>(0, c.op, 1);  // above every value
      } else {
        ok = compare<int64_t>(static_cast<int64_t>(v.bits), c.op, constant);
      }
    } else if (c.negative) {
      ok = compare<int>(1, c.op, 0);  // unsigned: a negative constant is below every value
    } else {
      ok = compare<uint64_t>(v.bits, c.op, c.magnitude);
    }
    if (!ok) return false;
  }
  return true;
}

bool Trigger::parse_window(const std::string& text, uint64_t* events, uint64_t* ns) {
  if (text.empty()) return false;
  size_t digits = text.find_first_not_of("0123456789");
  if (digits == 0 || (digits != std::string::npos && digits > 18) ||
      (digits == std::string::npos && text.size() > 18)) {
    return false;
  }
  uint64_t v = std::stoull(text.substr(0, digits));
  std::string unit = digits == std::string::npos ? "" : text.substr(digits);
  uint64_t scale = 0;
  if (unit.empty() || unit == "events" || unit == "ns") {
    scale = 1;
  } else if (unit == "us") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1000000;
  } else if (unit == "s") {
    scale = 1000000000;
  } else {
    return false;
  }
  // 18 digits of seconds are beyond 64 bits of nanoseconds: refused, not wrapped to a short
  // window.
  if (v > UINT64_MAX / scale) return false;
  const bool is_events = unit.empty() || unit == "events";
  *events = is_events ? v : 0;
  *ns = is_events ? 0 : v * scale;
  return true;
}

}  // namespace nanotrace
