// Pair rules: parsing "BEGIN,END,KEY" and resolving a rule's event names and key field
// against a trace's event table. Shared by the analyses and the exporters' slices.
#include <fmt/format.h>

#include <algorithm>

#include "nanotrace/analysis.hpp"

namespace nanotrace {

Result<PairRule> parse_pair_rule(std::string_view text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    parts.emplace_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) {
    return Status::Invalid(fmt::format(
        "bad pair rule '{}': expected BEGIN,END,KEY (e.g. io:submit,io:complete,req)", text));
  }
  return PairRule{parts[0], parts[1], parts[2]};
}

std::vector<std::string> known_event_names(const Trace& trace) {
  std::vector<std::string> names;
  for (const EventInfo& e : trace.events()) {
    if (!e.is_guard) names.push_back(e.full_name());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

namespace {

Status unknown_event(const Trace& trace, const std::string& name) {
  std::vector<std::string> known = known_event_names(trace);
  return Status::NotFound(
      fmt::format("no event '{}' in this trace (known events: {})", name,
                  known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
}

int field_index(const EventInfo& e, const std::string& field) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == field) return static_cast<int>(i);
  }
  return -1;
}

Status missing_field(const EventInfo& e, const std::string& field) {
  std::vector<std::string> names;
  for (const FieldInfo& f : e.fields) names.push_back(f.name);
  return Status::NotFound(
      fmt::format("event {} has no field '{}' (its fields: {})", e.full_name(), field,
                  names.empty() ? "none" : fmt::to_string(fmt::join(names, ", "))));
}

}  // namespace

Result<ResolvedPair> resolve_pair(const Trace& trace, const PairRule& rule) {
  ResolvedPair out;
  out.rule = rule;
  size_t n = trace.events().size() + 1;
  out.key_field.assign(n, -1);
  out.role.assign(n, 0);
  for (int pass = 0; pass < 2; ++pass) {
    const std::string& name = pass == 0 ? rule.begin : rule.end;
    std::vector<uint16_t>& ids = pass == 0 ? out.begin_ids : out.end_ids;
    for (const EventInfo& e : trace.events()) {
      if (e.is_guard || e.full_name() != name) continue;
      int k = field_index(e, rule.key);
      if (k < 0) return missing_field(e, rule.key);
      ids.push_back(e.id);
      if (e.id < n) {
        out.key_field[e.id] = k;
        out.role[e.id] = static_cast<uint8_t>(pass + 1);
      }
    }
    if (ids.empty()) return unknown_event(trace, name);
  }
  if (rule.begin == rule.end) {
    return Status::Invalid(
        fmt::format("pair rule {}: begin and end are the same event", rule.label()));
  }
  return out;
}

std::vector<PairRule> pairs_that_occur(const Trace& trace, const std::vector<PairRule>& rules,
                                       const std::vector<uint64_t>& records_per_event) {
  auto any_record = [&](const std::vector<uint16_t>& ids) {
    for (uint16_t id : ids) {
      if (id < records_per_event.size() && records_per_event[id] > 0) return true;
    }
    return false;
  };
  std::vector<PairRule> out;
  for (const PairRule& rule : rules) {
    auto resolved = resolve_pair(trace, rule);
    if (resolved.ok() && any_record(resolved->begin_ids) && any_record(resolved->end_ids)) {
      out.push_back(rule);
    }
  }
  return out;
}

}  // namespace nanotrace
