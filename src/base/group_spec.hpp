// The one grammar for a list of event groups, wherever one is accepted: NANOTRACE_GROUPS and
// Options::groups, `nanotrace enable/disable`, `nanotrace record --groups`, `iograph perf
// --trace`. Items are separated by commas and applied left to right; each is a group name,
// `all` (or `*`) or `none`, and a leading `-` switches it off instead of on:
// `all`, `io,sched`, `all,-debug`. Spaces around an item are ignored.
//
// Used by the traced process's runtime as well as by the tools: no fmt, no exceptions.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace {

// True if `spec` switches `group` on. Items naming another group change nothing, so an
// unknown name is simply ignored here: validate_group_spec is the place that rejects it.
bool group_spec_enables(std::string_view spec, std::string_view group);

// Ok if `spec` has at least one item and every item is `all`, `*`, `none` or a name in
// `known` (each possibly negated). Otherwise one line for the user, the same everywhere:
//   kNotFound:        "no group named 'x' (groups: io, sched)"
//   kInvalidArgument: "empty group list (expected e.g. all, io,sched or all,-debug)", or
//                     "empty item in group list 'io,,sched' (expected ...)"
Status validate_group_spec(std::string_view spec, const std::vector<std::string>& known);

// The names of `known` that `spec` switches on, in the order of `known`, after
// validate_group_spec (whose error it returns).
Result<std::vector<std::string>> groups_selected_by_spec(std::string_view spec,
                                                         const std::vector<std::string>& known);

}  // namespace nanotrace
