// A self-contained HTML report of a trace: summary, per-event counts, a latency histogram
// per pair rule, and timelines of the whole trace and of its busiest window that account for
// every record (aggregated per pixel column). Built on the analyses (nanotrace/analysis.hpp,
// nanotrace/intervals.hpp); part of the exporters' library, since it is an output format.
//
// Memory: the report reads the trace twice (counts and the busiest window, then pairs and
// timelines) and keeps 8 bytes per matched pair. Its size is bounded by the timelines'
// cells, not by the number of records (docs/export.md, "report").
//
// Thread safety: takes a Trace, which belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/analysis.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

struct ReportOptions {
  std::string output;             // the HTML file to write
  std::vector<PairRule> pairs;    // empty: infer_pairs() among the events that have records
  uint64_t window_ns = 10000000;  // width of the timeline window (the busiest one is drawn)
};

struct ReportSummary {
  uint64_t records = 0;
  uint64_t lost = 0;
  uint32_t pairs = 0;
  uint64_t window_begin_ns = 0;
  uint64_t window_records = 0;  // records the busiest window's timeline accounts for
};

// write_html_report - writes one self-contained HTML page (no script, no external
// resource): summary, per-event counts, a latency histogram per pair rule, a legend, and SVG
// timelines of the whole trace and of the busiest window.
// Returns: what the report holds.
// Errors: kNotFound (no records; a --pair names an unknown event or field), kIoError (the
// output cannot be written).
Result<ReportSummary> write_html_report(Trace& trace, const ReportOptions& options);

}  // namespace nanotrace
