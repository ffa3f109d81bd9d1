// The group-list grammar shared by the runtime and the tools (see group_spec.hpp).
#include "base/group_spec.hpp"

#include <algorithm>

namespace nanotrace {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls item(name, negated) for each item of the spec, empty items included.
template <class Item>
void for_each_item(std::string_view spec, Item&& item) {
  for (;;) {
    const size_t comma = spec.find(',');
    std::string_view text = trim(spec.substr(0, comma));
    const bool negated = !text.empty() && text.front() == '-';
    if (negated) text = trim(text.substr(1));
    item(text, negated);
    if (comma == std::string_view::npos) return;
    spec.remove_prefix(comma + 1);
  }
}

bool is_all(std::string_view name) { return name == "all" || name == "*"; }

}  // namespace

bool group_spec_enables(std::string_view spec, std::string_view group) {
  bool enabled = false;
  for_each_item(spec, [&](std::string_view name, bool negated) {
    if (is_all(name) || name == group) enabled = !negated;
    if (name == "none") enabled = false;
  });
  return enabled;
}

Status validate_group_spec(std::string_view spec, const std::vector<std::string>& known) {
  std::string bad;
  bool empty_item = false;
  for_each_item(spec, [&](std::string_view name, bool /*negated*/) {
    if (!bad.empty() || empty_item) return;
    if (name.empty()) {
      empty_item = true;
    } else if (!is_all(name) && name != "none" &&
               std::find(known.begin(), known.end(), name) == known.end()) {
      bad = name;
    }
  });
  if (empty_item) {
    const std::string where = trim(spec).empty()
                                  ? "empty group list"
                                  : "empty item in group list '" + std::string(spec) + "'";
    return Status::Invalid(where + " (expected e.g. all, io,sched or all,-debug)");
  }
  if (bad.empty()) return Status::Ok();
  std::string names;
  for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
  return Status::NotFound("no group named '" + bad + "' (groups: " +
                          (names.empty() ? std::string("none declared") : names) + ")");
}

Result<std::vector<std::string>> groups_selected_by_spec(std::string_view spec,
                                                         const std::vector<std::string>& known) {
  if (Status s = validate_group_spec(spec, known); !s.ok()) return s;
  std::vector<std::string> selected;
  for (const std::string& k : known) {
    if (group_spec_enables(spec, k)) selected.push_back(k);
  }
  return selected;
}

}  // namespace nanotrace
