// A self-contained HTML report of a trace: summary, per-event counts, a latency histogram
// per pair rule and a timeline of the busiest window. Built on the analyses
// (nanotrace/analysis.hpp); part of the exporters' library, since it is an output format.
//
// Memory: the report reads the trace twice (statistics, then the busiest window).
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
  std::vector<PairRule> pairs;    // empty: infer_pairs()
  uint64_t window_ns = 10000000;  // width of the timeline window (the busiest one is drawn)
};

struct ReportSummary {
  uint64_t records = 0;
  uint64_t lost = 0;
  uint32_t pairs = 0;
  uint64_t window_begin_ns = 0;
  uint64_t window_records = 0;
};

// write_html_report - writes one self-contained HTML page (no external resources): summary,
// per-event counts, a latency histogram per pair rule, and an SVG timeline of the busiest
// window.
// Returns: what the report holds.
// Errors: kNotFound (no records; a --pair names an unknown event or field), kIoError (the
// output cannot be written).
Result<ReportSummary> write_html_report(Trace& trace, const ReportOptions& options);

}  // namespace nanotrace
