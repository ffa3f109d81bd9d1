// Trace.stats(), Trace.latency() and Trace.pairs() of the Python module.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::python {

// Counts, rates and losses: the keys of `nanotrace stats --json` but its nodes and kernel parts.
pybind11::dict trace_stats(Trace& trace);
// The latency report: the keys of `nanotrace latency --json`. by: "" for no split.
pybind11::dict trace_latency(Trace& trace, const std::string& begin, const std::string& end,
                             const std::string& key, const std::string& by, uint32_t top);
// Every outcome of the interval matcher for one rule, as columns: kind ("pair",
// "unmatched_begin", "unmatched_end"), begin_ns, end_ns, latency_ns (0 unless a pair),
// begin_tid, end_tid (0 where absent), key, by (with a by field: the begin record's; an
// unmatched end's is 0 or "", for the package to replace with None), lost_adjacent. Key and
// by are typed like their field (its text if the rule's events disagree on its type). Rows
// in the order the outcomes were known (a pair at its end; open intervals last).
pybind11::dict trace_pairs(Trace& trace, const std::string& begin, const std::string& end,
                           const std::string& key, const std::string& by);

// nanotrace.diff(): the JSON document of `nanotrace diff --json` (nanotrace/diff.hpp) for the
// package to parse. pairs: "BEGIN,END,KEY" texts; min_change in percent, as the CLI's.
std::string runs_diff_json(const std::vector<std::string>& a, const std::vector<std::string>& b,
                           const std::vector<std::string>& pairs, double alpha, double min_change,
                           uint32_t resamples, uint64_t seed);

}  // namespace nanotrace::python
