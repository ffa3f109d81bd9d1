// Pair rules: parsing "BEGIN,END,KEY", resolving a rule's event names and key field against a
// trace's event table, and the rules found from event names or known by name. Shared by the
// analyses, the exporters' slices and the live view.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

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

// extended: the rule may name kernel events (they are then listed among the known ones).
Status unknown_event(const Trace& trace, const std::string& name, bool extended) {
  std::vector<std::string> known = known_event_names(trace);
  for (const EventInfo& e : trace.kernel_events()) {
    if (!extended && e.full_name() == name) {
      return Status::Invalid(fmt::format(
          "{} is a kernel event: slices and report pairs are drawn from user-space events; "
          "`nanotrace latency` and `nanotrace breakdown` pair kernel events",
          name));
    }
    if (extended) known.push_back(e.full_name());
  }
  return Status::NotFound(
      fmt::format("no event '{}' in this trace (known events: {})", name,
                  known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
}

// "dev+sector" -> {"dev", "sector"}.
std::vector<std::string> key_parts(const std::string& key) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (;;) {
    size_t plus = key.find('+', at);
    parts.push_back(key.substr(at, plus == std::string::npos ? plus : plus - at));
    if (plus == std::string::npos) return parts;
    at = plus + 1;
  }
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

// extended: kernel events and keys of several fields too.
Result<ResolvedPair> resolve(const Trace& trace, const PairRule& rule, bool extended) {
  ResolvedPair out;
  out.rule = rule;
  const std::vector<std::string> keys =
      extended ? key_parts(rule.key) : std::vector<std::string>{rule.key};
  for (const std::string& k : keys) {
    if (k.empty()) {
      return Status::Invalid(fmt::format("bad key '{}': field names joined by '+'", rule.key));
    }
  }
  size_t n = trace.events().size() + 1;
  out.key_field.assign(n, -1);
  out.role.assign(n, 0);
  out.more_key_fields.assign(n, {});
  static const std::vector<EventInfo> kNone;
  const std::vector<EventInfo>& kernel = extended ? trace.kernel_events() : kNone;
  out.kernel_key_field.assign(kernel.size(), -1);
  out.kernel_role.assign(kernel.size(), 0);
  out.kernel_more_key_fields.assign(kernel.size(), {});
  // Binds one event of the rule: its key fields and its role.
  auto bind = [&](const EventInfo& e, int pass, std::vector<int>& key_field,
                  std::vector<uint8_t>& role, std::vector<std::vector<int>>& more) -> Status {
    std::vector<int> fields;
    for (const std::string& k : keys) {
      int f = field_index(e, k);
      if (f < 0) return missing_field(e, k);
      fields.push_back(f);
    }
    if (e.id < role.size()) {
      key_field[e.id] = fields[0];
      role[e.id] = static_cast<uint8_t>(pass + 1);
      more[e.id].assign(fields.begin() + 1, fields.end());
    }
    return Status::Ok();
  };
  for (int pass = 0; pass < 2; ++pass) {
    const std::string& name = pass == 0 ? rule.begin : rule.end;
    std::vector<uint16_t>& ids = pass == 0 ? out.begin_ids : out.end_ids;
    std::vector<uint16_t>& kernel_ids = pass == 0 ? out.kernel_begin_ids : out.kernel_end_ids;
    for (const EventInfo& e : trace.events()) {
      if (e.is_guard || e.full_name() != name) continue;
      if (Status s = bind(e, pass, out.key_field, out.role, out.more_key_fields); !s.ok()) {
        return s;
      }
      ids.push_back(e.id);
    }
    // A kernel event of the same name as a user one is not looked at: the user event wins.
    if (ids.empty()) {
      for (const EventInfo& e : kernel) {
        if (e.full_name() != name) continue;
        Status s = bind(e, pass, out.kernel_key_field, out.kernel_role, out.kernel_more_key_fields);
        if (!s.ok()) return s;
        kernel_ids.push_back(e.id);
      }
    }
    if (ids.empty() && kernel_ids.empty()) return unknown_event(trace, name, extended);
  }
  if (rule.begin == rule.end) {
    return Status::Invalid(
        fmt::format("pair rule {}: begin and end are the same event", rule.label()));
  }
  return out;
}

}  // namespace

Result<ResolvedPair> resolve_pair(const Trace& trace, const PairRule& rule) {
  return resolve(trace, rule, false);
}

Result<ResolvedPair> resolve_pair_with_kernel(const Trace& trace, const PairRule& rule) {
  return resolve(trace, rule, true);
}

std::vector<PairRule> infer_pairs(const Trace& trace) {
  static const std::pair<const char*, const char*> kSuffixes[] = {
      {"_start", "_end"}, {"_begin", "_end"}, {"_start", "_stop"}};
  static const std::pair<const char*, const char*> kNames[] = {
      {"start", "stop"}, {"begin", "end"}, {"submit", "complete"}, {"start", "end"}};
  std::vector<PairRule> rules;
  const std::vector<EventInfo>& events = trace.events();
  auto find = [&](const std::string& group, const std::string& name) -> const EventInfo* {
    for (const EventInfo& e : events) {
      if (!e.is_guard && e.group == group && e.name == name) return &e;
    }
    return nullptr;
  };
  auto add = [&](const EventInfo& b, const EventInfo& e) {
    for (const FieldInfo& f : b.fields) {
      for (const FieldInfo& g : e.fields) {
        if (f.name != g.name) continue;
        PairRule rule{b.full_name(), e.full_name(), f.name};
        for (const PairRule& r : rules) {
          if (r.begin == rule.begin && r.end == rule.end) return;
        }
        rules.push_back(rule);
        return;
      }
    }
  };
  for (const EventInfo& b : events) {
    if (b.is_guard) continue;
    for (const auto& [bs, es] : kSuffixes) {
      size_t n = std::strlen(bs);
      if (b.name.size() > n && b.name.compare(b.name.size() - n, n, bs) == 0) {
        const EventInfo* e = find(b.group, b.name.substr(0, b.name.size() - n) + es);
        if (e) add(b, *e);
      }
    }
    for (const auto& [bn, en] : kNames) {
      if (b.name == bn) {
        const EventInfo* e = find(b.group, en);
        if (e) add(b, *e);
      }
    }
  }
  return rules;
}

std::vector<PairRule> known_pair_rules() {
  return {
      {"iograph:node_submit", "iograph:node_complete", "node"},
      {"io_uring:sqe", "io_uring:cqe", "user_data"},
      {"io_uring:io_uring_submit_req", "io_uring:io_uring_complete", "user_data"},
      {"block:block_rq_issue", "block:block_rq_complete", "dev+sector"},
  };
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
