// The report's latency histograms and the legend of its colours (report_html.cc draws the
// rest of the page).
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "nanotrace/analysis.hpp"

namespace nanotrace::report {

// A latency histogram as SVG: log2 latency buckets along x, pairs per bucket on a log10
// scale along y (so a bucket of one pair still shows next to one of millions), axis labels,
// and each bucket's range and count on hover (and above its bar when there is room).
void render_histogram(fmt::memory_buffer& out, const LatencyStats& stats, size_t rule);

// One colour of the legend: a swatch and what it stands for (raw trace text).
struct LegendEntry {
  const char* color;
  std::string label;
};

// The legend of the timelines: the records lanes' event colours, the pairs lanes' rule
// colours, and what the bars' heights mean.
void render_legend(fmt::memory_buffer& out, const std::vector<LegendEntry>& events,
                   const std::vector<LegendEntry>& rules);

}  // namespace nanotrace::report
