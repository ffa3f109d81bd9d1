// Parsing and evaluating trigger expressions (see nanotrace/trigger.hpp).
#include "nanotrace/trigger.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
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

// "group:event" into its two identifiers; false if it is not one.
bool split_event(std::string_view name, std::string* group, std::string* event) {
  size_t colon = name.find(':');
  if (colon == std::string_view::npos || !is_ident(name.substr(0, colon)) ||
      !is_ident(name.substr(colon + 1))) {
    return false;
  }
  *group = std::string(name.substr(0, colon));
  *event = std::string(name.substr(colon + 1));
  return true;
}

// The words of a duration trigger after its events; '>' is a word of its own even when
// written against its neighbours ("req>5ms").
std::vector<std::string> duration_words(std::string_view s) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else if (c == '>' || c == '<' || c == '=' || c == '!') {
      // An operator: '>' alone is the threshold's; the others are refused by the caller.
      if (!word.empty() && word.find_first_not_of("<>=!") != std::string::npos) flush();
      word += c;
    } else {
      if (!word.empty() && word.find_first_not_of("<>=!") == std::string::npos) flush();
      word += c;
    }
  }
  flush();
  return words;
}

bool is_option(const std::string& w) {
  return w == "cap" || w == "cooldown" || w == "over" || w == "warmup";
}

// "10xp99", "10x p99.9" (spaces removed), "2.5 x p50": factor and percentile.
bool parse_relative(std::string_view written, double* factor, double* percentile) {
  std::string text;  // with the multiplication sign (UTF-8 C3 97) as 'x'
  for (size_t i = 0; i < written.size(); ++i) {
    const bool times = written.substr(i, 2) == "\u00d7";
    text += times ? 'x' : written[i];
    if (times) ++i;
  }
  size_t x = text.find('x');
  if (x == std::string::npos || x + 1 >= text.size() || text[x + 1] != 'p') return false;
  std::string f = text.substr(0, x), p = text.substr(x + 2);
  char* end = nullptr;
  *factor = std::strtod(f.c_str(), &end);
  if (f.empty() || *end != '\0' || !(*factor > 0) || *factor > 1e6) return false;
  *percentile = std::strtod(p.c_str(), &end);
  return !p.empty() && *end == '\0' && *percentile > 0 && *percentile < 100;
}

Status duration_error(const std::string& what) {
  return Status::Invalid("duration trigger: " + what);
}

// The options after the threshold: cap N per DURATION, cooldown DURATION, over DURATION,
// warmup N.
Status parse_duration_options(const std::vector<std::string>& w, size_t i, DurationRule* d) {
  bool seen_cap = false, seen_cooldown = false, seen_over = false, seen_warmup = false;
  auto count = [](const std::string& s, uint64_t max, uint64_t* v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && end == s.data() + s.size() && *v > 0 && *v <= max;
  };
  while (i < w.size()) {
    const std::string& option = w[i];
    auto once = [&](bool* seen) {
      bool first = !*seen;
      *seen = true;
      return first;
    };
    auto value = [&]() -> const std::string* { return i + 1 < w.size() ? &w[i + 1] : nullptr; };
    const std::string* v = value();
    if (option == "cap") {
      if (!once(&seen_cap)) return duration_error("'cap' given twice");
      // "cap 3 per 10s" or "cap 3/10s".
      std::string n = v ? *v : "", per;
      size_t consumed = 2;
      if (size_t slash = n.find('/'); slash != std::string::npos) {
        per = n.substr(slash + 1);
        n = n.substr(0, slash);
      } else if (i + 3 < w.size() && w[i + 2] == "per") {
        per = w[i + 3];
        consumed = 4;
      }
      uint64_t cap = 0;
      if (!count(n, 1000000, &cap) || !Trigger::parse_duration(per, &d->limits.per_ns) ||
          d->limits.per_ns == 0) {
        return duration_error("expected 'cap N per DURATION' (e.g. cap 3 per 10s)");
      }
      d->limits.cap = static_cast<uint32_t>(cap);
      i += consumed;
    } else if (option == "cooldown") {
      if (!once(&seen_cooldown)) return duration_error("'cooldown' given twice");
      if (!v || !Trigger::parse_duration(*v, &d->limits.cooldown_ns)) {
        return duration_error("expected 'cooldown DURATION' (e.g. cooldown 1s)");
      }
      i += 2;
    } else if (option == "over" || option == "warmup") {
      if (!d->adaptive()) {
        return duration_error("'" + option + "' applies to a relative threshold (> 10 x p99)");
      }
      if (option == "over") {
        if (!once(&seen_over)) return duration_error("'over' given twice");
        if (!v || !Trigger::parse_duration(*v, &d->window_ns) || d->window_ns < 10'000'000) {
          return duration_error("expected 'over DURATION' of at least 10ms (e.g. over 10s)");
        }
      } else {
        if (!once(&seen_warmup)) return duration_error("'warmup' given twice");
        if (!v || !count(*v, uint64_t{1} << 40, &d->warmup)) {
          return duration_error("expected 'warmup N' pairs (e.g. warmup 1000)");
        }
      }
      i += 2;
    } else {
      return duration_error("unexpected '" + option +
                            "' (options: cap N per DURATION, cooldown DURATION, over DURATION, "
                            "warmup N)");
    }
  }
  return Status::Ok();
}

// BEGIN..END by KEY [open] > THRESHOLD [options].
Result<Trigger> parse_duration_trigger(Trigger t, std::string_view events, std::string_view rest) {
  DurationRule d;
  size_t dots = events.find("..");
  if (!split_event(events.substr(0, dots), &d.begin_group, &d.begin_event) ||
      !split_event(events.substr(dots + 2), &d.end_group, &d.end_event)) {
    return duration_error("expected BEGIN..END with events as group:event, got '" +
                          std::string(events) + "'");
  }
  if (d.begin_name() == d.end_name()) {
    return duration_error("begin and end are the same event " + d.begin_name());
  }
  const std::vector<std::string> w = duration_words(rest);
  size_t i = 0;
  if (i >= w.size() || w[i] != "by") {
    return duration_error("expected 'by KEY' after " + std::string(events));
  }
  if (++i >= w.size()) return duration_error("missing the key after 'by'");
  for (size_t at = 0;;) {
    size_t plus = w[i].find('+', at);
    std::string field = w[i].substr(at, plus == std::string::npos ? plus : plus - at);
    if (!is_ident(field)) return duration_error("bad key '" + w[i] + "'");
    d.key.push_back(field);
    if (plus == std::string::npos) break;
    at = plus + 1;
  }
  if (++i < w.size() && w[i] == "open") {
    d.open = true;
    ++i;
  }
  if (i >= w.size() || w[i] != ">") {
    return duration_error("expected '> THRESHOLD' after the key (e.g. > 5ms, > 10 x p99)" +
                          (i < w.size() ? ", got '" + w[i] + "'" : std::string()));
  }
  std::string threshold;
  auto threshold_part = [](const std::string& word) {
    for (unsigned char c : word) {
      if (!std::isalnum(c) && c != '.' && c < 0x80) return false;  // 0x80+: the UTF-8 of ×
    }
    return !is_option(word);
  };
  for (++i; i < w.size() && threshold_part(w[i]); ++i) threshold += w[i];
  if (threshold.empty()) return duration_error("missing the threshold after '>'");
  if (!Trigger::parse_duration(threshold, &d.threshold_ns) &&
      !parse_relative(threshold, &d.factor, &d.percentile)) {
    return duration_error("bad threshold '" + threshold +
                          "': a duration (5ms, 250us, 1.5s) or a multiple of a percentile "
                          "(10 x p99)");
  }
  if (Status s = parse_duration_options(w, i, &d); !s.ok()) return s;
  t.group = d.open ? d.begin_group : d.end_group;
  t.event = d.open ? d.begin_event : d.end_event;
  t.duration = std::move(d);
  return t;
}

}  // namespace

std::string DurationRule::key_text() const {
  std::string out;
  for (const std::string& k : key) out += (out.empty() ? "" : "+") + k;
  return out;
}

std::string DurationRule::threshold_text() const {
  auto trimmed = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  if (adaptive()) return trimmed(factor) + " x p" + trimmed(percentile);
  const uint64_t ns = threshold_ns;
  if (ns != 0 && ns % 1000000000 == 0) return std::to_string(ns / 1000000000) + "s";
  if (ns != 0 && ns % 1000000 == 0) return std::to_string(ns / 1000000) + "ms";
  if (ns != 0 && ns % 1000 == 0) return std::to_string(ns / 1000) + "us";
  return std::to_string(ns) + "ns";
}

Result<std::vector<uint32_t>> DurationRule::bind_key(const std::string& event_name,
                                                     const std::vector<std::string>& names) const {
  std::vector<uint32_t> index;
  for (const std::string& k : key) {
    uint32_t i = 0;
    while (i < names.size() && std::string_view(names[i]).substr(0, names[i].find(':')) != k) ++i;
    if (i == names.size()) {
      return Status::NotFound("event " + event_name + " has no field '" + k + "' (the key)");
    }
    index.push_back(i);
  }
  return index;
}

bool Trigger::parse_duration(std::string_view text, uint64_t* ns) {
  size_t unit = 0;
  while (unit < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[unit])) || text[unit] == '.')) {
    ++unit;
  }
  std::string number(text.substr(0, unit));
  std::string_view u = text.substr(unit);
  double scale = u == "ns" ? 1 : u == "us" ? 1e3 : u == "ms" ? 1e6 : u == "s" ? 1e9 : 0;
  if (u == "m" || u == "min") scale = 60e9;
  if (u == "h") scale = 3600e9;
  if (number.empty() || scale == 0 || number.size() > 24) return false;
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (*end != '\0' || !(v >= 0)) return false;
  const double total = v * scale + 0.5;  // rounded by the cast below (std::round is libm's)
  if (total >= 9.2e18) return false;
  *ns = static_cast<uint64_t>(total);
  return true;
}

Result<Trigger> Trigger::parse(std::string_view text) {
  Trigger t;
  t.text = std::string(trim(text));
  std::string_view rest = t.text;
  size_t space = rest.find_first_of(" \t");
  std::string_view name = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view() : trim(rest.substr(space));
  if (name.find("..") != std::string_view::npos) {
    return parse_duration_trigger(std::move(t), name, rest);
  }
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
