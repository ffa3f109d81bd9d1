// Latency histograms (log2 buckets, log10 counts) and the timeline legend of the HTML report.
#include "export/report_charts.hpp"

#include <algorithm>
#include <cmath>

#include "export/report_text.hpp"

namespace nanotrace::report {
namespace {

constexpr double kAxisWidth = 70, kPlotHeight = 160, kTop = 34, kMaxBar = 56, kMaxWidth = 1000;

// Height of a bar of `count` pairs when the axis runs to 10^decades: each decade is one
// step, a single pair is the first.
double bar_height(uint64_t count, int decades) {
  if (count == 0) return 0;
  return kPlotHeight * (1 + std::log10(static_cast<double>(count))) / (1 + decades);
}

}  // namespace

void render_histogram(fmt::memory_buffer& out, const LatencyStats& s, size_t rule) {
  auto it = std::back_inserter(out);
  uint64_t peak = 1;
  for (const HistogramBucket& h : s.histogram) peak = std::max(peak, h.count);
  int decades = 0;
  for (uint64_t p = 1; p < peak; p *= 10) ++decades;  // 10^decades >= peak
  const size_t n = s.histogram.size();
  const double bw = std::min(kMaxBar, kMaxWidth / static_cast<double>(n));
  const double base = kTop + kPlotHeight;
  fmt::format_to(it,
                 "<svg class=\"histogram\" data-rule=\"{}\" width=\"{:.0f}\" height=\"{:.0f}\">"
                 "<text x=\"0\" y=\"12\">pairs (log scale)</text>"
                 "<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">latency (log2 buckets, "
                 "hover a bar for its range and count)</text>",
                 rule, kAxisWidth + bw * n + 20, base + 48, kAxisWidth + bw * n / 2, base + 44);
  for (int d = 0; d <= decades; ++d) {
    double y = base - bar_height(static_cast<uint64_t>(std::pow(10.0, d)), decades);
    fmt::format_to(it,
                   "<line x1=\"{0}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
                   "stroke=\"#ddd\"/><text class=\"tick\" x=\"{3}\" y=\"{4:.1f}\" "
                   "text-anchor=\"end\">{5}</text>",
                   kAxisWidth, kAxisWidth + bw * n, y, kAxisWidth - 4, y + 4,
                   static_cast<uint64_t>(std::pow(10.0, d)));
  }
  // Latency labels at bucket edges, as many as fit.
  const size_t every = std::max<size_t>(1, static_cast<size_t>(std::ceil(56 / bw)));
  for (size_t i = 0; i < n; ++i) {
    const HistogramBucket& h = s.histogram[i];
    const double x = kAxisWidth + static_cast<double>(i) * bw;
    const double bh = bar_height(h.count, decades);
    fmt::format_to(
        it,
        "<rect class=\"bucket\" data-lo-ns=\"{}\" data-hi-ns=\"{}\" data-count=\"{}\" "
        "x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
        "<title>[{}, {}): {} pair{} ({:.3g}%)</title></rect>",
        h.lo_ns, h.hi_ns, h.count, x + 1, base - bh, bw - 2, bh, rule_color(rule),
        duration(h.lo_ns), duration(h.hi_ns), h.count, h.count == 1 ? "" : "s",
        s.count ? 100.0 * static_cast<double>(h.count) / static_cast<double>(s.count) : 0.0);
    // The count above its bar when it fits (about 6 px a digit at this size).
    if (h.count > 0 && 6.0 * static_cast<double>(fmt::formatted_size("{}", h.count)) < bw) {
      fmt::format_to(it,
                     "<text class=\"count\" x=\"{:.1f}\" y=\"{:.1f}\" "
                     "text-anchor=\"middle\">{}</text>",
                     x + bw / 2, base - bh - 3, h.count);
    }
    if (i % every == 0) {
      fmt::format_to(it,
                     "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.0f}\" y2=\"{2:.0f}\" "
                     "stroke=\"#888\"/><text x=\"{0:.1f}\" y=\"{3:.0f}\" "
                     "text-anchor=\"middle\">{4}</text>",
                     x, base, base + 5, base + 18, duration(h.lo_ns));
    }
  }
  fmt::format_to(it,
                 "<line x1=\"{0}\" x2=\"{1:.0f}\" y1=\"{2:.0f}\" y2=\"{2:.0f}\" "
                 "stroke=\"#888\"/></svg>\n",
                 kAxisWidth, kAxisWidth + bw * n, base);
}

void render_legend(fmt::memory_buffer& out, const std::vector<LegendEntry>& events,
                   const std::vector<LegendEntry>& rules) {
  auto it = std::back_inserter(out);
  auto entries = [&](const char* id, const std::vector<LegendEntry>& list) {
    fmt::format_to(it, "<ul id=\"{}\">", id);
    for (const LegendEntry& e : list) {
      fmt::format_to(it, "<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>",
                     e.color, html(e.label, 120));
    }
    out.append(std::string_view("</ul>"));
  };
  out.append(std::string_view(
      "<div id=\"legend\" class=\"legend\"><p><b>Records lanes</b> (upper bar of each row): "
      "one bar per pixel column holding records; its colour is the column's most frequent "
      "event, its height grows with the log of its record count. Hover for the count, the "
      "events and the first record's fields.</p>"));
  entries("legend-events", events);
  if (!rules.empty()) {
    out.append(std::string_view(
        "<p><b>Pairs lanes</b> (lower bar, on the row of the begin record's thread): the "
        "begin/end pairs overlapping the column; its colour is the slowest pair's rule, its "
        "height grows with the log of that pair's latency. Hover for the count and the "
        "slowest pair.</p>"));
    entries("legend-rules", rules);
  }
  out.append(std::string_view("</div>\n"));
}

}  // namespace nanotrace::report
