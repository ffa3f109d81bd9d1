// The nodes of a trace (Trace::nodes()) as `stats` and `merge` print them: a table, or JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "nanotrace/reader.hpp"

namespace nanotrace::cli {

// "exact", "±1.2 us", "unknown".
std::string error_bound_text(uint64_t ns, bool exact_when_zero = true);
// An error bound in JSON: nanoseconds, or null when unknown.
nlohmann::json error_bound_json(uint64_t ns);
// "chrony ±35 us (offset -1.2 us, 10.0.0.1)", "unknown".
std::string sync_text(const NodeInfo& node);
// An RFC 3339 UTC time with nanoseconds.
std::string utc_text(uint64_t realtime_ns);
// Every node, with its processes, clock sync, alignment and error bound, and trigger origin.
nlohmann::json nodes_json(const Trace& trace);
// The node whose trigger fired first on the trace's timeline, or null.
nlohmann::json origin_json(const Trace& trace);
// The table `stats` prints (nothing for a trace that describes no node).
void print_nodes(const Trace& trace);

}  // namespace nanotrace::cli
