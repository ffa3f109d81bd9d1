// `nanotrace report`: one self-contained HTML page (inline CSS and SVG, no script, no
// external resource) summarising a trace: totals and rates, losses per thread, counts per
// event, a latency table and log2 histogram per begin/end pair rule, and a timeline of the
// busiest window (records per thread as ticks, pairs as slices).
//
// Two streamed passes: the first counts (and finds the busiest window with a sliding sum
// over time bins, at most 1 Mi bins, coarsened as the trace grows), the second draws the
// window (at most kMaxMarks marks). Memory: the latencies of the pair rules (8 bytes per
// pair), the bins, and the marks of the window.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "base/output_file.hpp"
#include "base/utf8.hpp"
#include "export/output.hpp"
#include "nanotrace/intervals.hpp"
#include "nanotrace/report.hpp"

namespace nanotrace {
namespace {

constexpr size_t kMaxBins = 1 << 20;
constexpr size_t kMaxMarks = 20000;
constexpr double kChartX = 150, kChartW = 1050;

// Text from the trace as HTML text: valid UTF-8, control characters shown as escapes
// (utf8::escape_text, as `nanotrace dump` prints them), markup characters as entities.
std::string html(std::string_view raw) {
  std::string s = utf8::escape_text(raw);
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string duration(uint64_t ns) {
  if (ns < 1000) return fmt::format("{} ns", ns);
  if (ns < 1000000) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns < 1000000000) return fmt::format("{:.1f} ms", ns / 1e6);
  return fmt::format("{:.2f} s", ns / 1e9);
}

const char* color(size_t i) {
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kColors[i % 10];
}

struct Mark {
  uint64_t t0, t1;
  uint32_t thread;
  uint16_t event;
  bool slice;
};

}  // namespace

Result<ReportSummary> write_html_report(Trace& trace, const ReportOptions& options) {
  if (options.output.empty()) return Status::Invalid("no output file given (-o)");
  if (options.output != "-") {
    Status same = check_not_source(options.output, trace.source_fd());
    if (!same.ok()) return same;
  }
  uint64_t window = std::max<uint64_t>(options.window_ns, 1000);
  std::vector<PairRule> rules = options.pairs.empty() ? infer_pairs(trace) : options.pairs;
  std::vector<std::unique_ptr<PairMatcher>> matchers;
  std::vector<ResolvedPair> resolved;
  for (const PairRule& rule : rules) {
    auto m = PairMatcher::create(trace, rule, "", 5);
    if (!m.ok()) return m.status();
    matchers.push_back(std::move(*m));
    auto rp = resolve_pair(trace, rule);
    resolved.push_back(std::move(rp).value());
  }

  // Pass 1: counts, latencies, busiest window.
  const size_t nev = trace.events().size() + 1;
  std::vector<uint64_t> per_event(nev, 0);
  std::vector<uint64_t> bins;
  uint64_t bin_ns = std::max<uint64_t>(window / 10, 1);
  uint64_t first_ns = 0, last_ns = 0, records = 0;
  auto source = trace.read_all();
  std::vector<ThreadStats> threads = source->threads();
  Record r;
  while (source->next(&r)) {
    if (records == 0) first_ns = r.time_ns;
    last_ns = std::max(last_ns, r.time_ns);
    ++records;
    ++per_event[r.event->id];
    uint64_t b = r.time_ns / bin_ns;
    while (b >= kMaxBins) {
      for (size_t i = 0; i < bins.size(); ++i) {
        bins[i / 2] = (i % 2 ? bins[i / 2] : 0) + bins[i];
      }
      bins.resize((bins.size() + 1) / 2);
      bin_ns *= 2;
      b = r.time_ns / bin_ns;
    }
    if (b >= bins.size()) bins.resize(b + 1, 0);
    ++bins[b];
    for (auto& m : matchers) m->add(r, threads);
  }
  threads = source->threads();
  if (records == 0) {
    return Status::NotFound(fmt::format("the trace of process {} ({}) holds no records",
                                        trace.process().pid, trace.process().path));
  }
  size_t span = std::max<uint64_t>(1, (window + bin_ns - 1) / bin_ns);
  uint64_t best = 0, sum = 0;
  size_t best_at = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    sum += bins[i];
    if (i >= span) sum -= bins[i - span];
    if (sum > best) {
      best = sum;
      best_at = i + 1 >= span ? i + 1 - span : 0;
    }
  }
  uint64_t w0 = std::max<uint64_t>(best_at * bin_ns, first_ns);
  uint64_t w1 = w0 + window;

  // Pass 2: marks of the window; pairs from one IntervalMatcher over every rule.
  std::vector<Mark> marks;
  uint64_t window_records = 0, dropped_marks = 0;
  IntervalMatcher intervals(resolved);
  auto source2 = trace.read_all();
  while (source2->next(&r)) {
    if (r.time_ns >= w0 && r.time_ns < w1) ++window_records;
    const std::vector<IntervalMatch>& matches = intervals.add(r);
    for (const IntervalMatch& m : matches) {
      if (m.kind != IntervalMatch::Kind::kEnd) continue;
      const Interval& i = m.interval;
      if (i.begin_ns >= w1 || i.end_ns < w0) continue;
      if (marks.size() < kMaxMarks) {
        marks.push_back({std::max(i.begin_ns, w0), std::min(i.end_ns, w1), i.begin_thread,
                         static_cast<uint16_t>(m.rule), true});
      } else {
        ++dropped_marks;
      }
    }
    if (!matches.empty() || r.time_ns < w0 || r.time_ns >= w1) continue;
    if (marks.size() < kMaxMarks) {
      marks.push_back({r.time_ns, r.time_ns, r.thread, r.event->id, false});
    } else {
      ++dropped_marks;
    }
  }

  const ProcessInfo& proc = trace.process();
  uint64_t lost = 0;
  for (const ThreadStats& t : threads) lost += t.lost();
  uint64_t dur = last_ns - first_ns;
  double rate = dur > 0 ? records * 1e9 / dur : 0;

  exporter::OutFile out;
  Status st = out.open(options.output);
  if (!st.ok()) return st;
  fmt::memory_buffer& b = out.buf();
  auto it = std::back_inserter(b);
  std::string title = fmt::format("nanotrace report: {} (pid {})", proc.process_name, proc.pid);
  fmt::format_to(
      it,
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n"
      "<style>body{{font-family:sans-serif;margin:20px;color:#222}}"
      "table{{border-collapse:collapse;margin:8px 0}}td,th{{border:1px solid #ccc;"
      "padding:3px 8px;text-align:right}}th{{background:#eee}}td.l,th.l{{text-align:left}}"
      "h2{{margin-top:28px}}svg text{{font-size:11px;font-family:sans-serif}}"
      ".bar{{fill:#4a7bd0}}</style></head><body>\n<h1>{}</h1>\n",
      html(title), html(title));
  fmt::format_to(it,
                 "<h2>Summary</h2>\n<table id=\"summary\">"
                 "<tr><th class=\"l\">segment</th><td class=\"l\">{}</td></tr>"
                 "<tr><th class=\"l\">mode</th><td class=\"l\">{}</td></tr>"
                 "<tr><th class=\"l\">duration</th><td id=\"duration\" data-ns=\"{}\">{}</td></tr>"
                 "<tr><th class=\"l\">records</th><td id=\"records\">{}</td></tr>"
                 "<tr><th class=\"l\">rate</th><td id=\"rate\">{:.0f} records/s</td></tr>"
                 "<tr><th class=\"l\">lost</th><td id=\"lost\">{}</td></tr>"
                 "<tr><th class=\"l\">threads</th><td id=\"threads\">{}</td></tr></table>\n",
                 html(proc.path), mode_name(proc.mode), dur, duration(dur), records, rate, lost,
                 threads.size());

  b.append(
      std::string_view("<h2>Threads</h2>\n<table id=\"thread-table\"><tr><th>tid</th>"
                       "<th class=\"l\">name</th><th>records</th><th>overwritten</th>"
                       "<th>dropped</th></tr>"));
  for (const ThreadStats& t : threads) {
    fmt::format_to(it,
                   "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                   t.info.tid, html(t.info.name), t.records, t.overwritten, t.dropped);
  }
  b.append(
      std::string_view("</table>\n<h2>Events</h2>\n<table id=\"event-table\"><tr>"
                       "<th class=\"l\">event</th><th>records</th><th>share</th></tr>"));
  std::unordered_map<std::string, uint64_t> by_name;
  for (const EventInfo& e : trace.events()) by_name[e.full_name()] += per_event[e.id];
  std::vector<std::pair<std::string, uint64_t>> counts(by_name.begin(), by_name.end());
  std::sort(counts.begin(), counts.end(), [](const auto& a, const auto& c) {
    return a.second != c.second ? a.second > c.second : a.first < c.first;
  });
  for (const auto& [name, n] : counts) {
    if (n == 0) continue;
    double share = 100.0 * n / records;
    fmt::format_to(it,
                   "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\"><svg width=\"204\" "
                   "height=\"12\"><rect class=\"bar\" x=\"0\" y=\"1\" width=\"{:.1f}\" "
                   "height=\"10\"/></svg> {:.1f}%</td></tr>",
                   html(name), n, share * 2, share);
  }
  b.append(std::string_view("</table>\n<h2>Latency</h2>\n"));
  if (matchers.empty()) {
    b.append(std::string_view(
        "<p>No begin/end pairs given (--pair) or inferred from event names.</p>\n"));
  }
  for (size_t p = 0; p < matchers.size(); ++p) {
    LatencyReport rep = matchers[p]->finish();
    const LatencyStats& s = rep.overall;
    fmt::format_to(it,
                   "<h3>{}</h3>\n<table class=\"latency\"><tr><th>pairs</th><th>unmatched "
                   "begins</th><th>unmatched ends</th><th>min</th><th>p50</th><th>p90</th>"
                   "<th>p99</th><th>p99.9</th><th>max</th></tr><tr><td>{}</td><td>{}</td>"
                   "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                   "</tr></table>\n",
                   html(rep.rule.label()), s.count, s.unmatched_begins, rep.unmatched_ends,
                   duration(s.min_ns), duration(s.p50_ns), duration(s.p90_ns), duration(s.p99_ns),
                   duration(s.p999_ns), duration(s.max_ns));
    if (s.histogram.empty()) continue;
    uint64_t peak = 1;
    for (const HistogramBucket& h : s.histogram) peak = std::max(peak, h.count);
    double bw = std::min(60.0, kChartW / s.histogram.size());
    int hh = 160;
    fmt::format_to(it, "<svg class=\"histogram\" width=\"{:.0f}\" height=\"{}\">",
                   kChartX + bw * s.histogram.size() + 20, hh + 40);
    for (size_t i = 0; i < s.histogram.size(); ++i) {
      const HistogramBucket& h = s.histogram[i];
      double barh = h.count ? std::max(1.0, double(hh) * h.count / peak) : 0;
      double x = kChartX + i * bw;
      fmt::format_to(it,
                     "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                     "height=\"{:.1f}\"><title>[{}, {}): {}</title></rect>"
                     "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                     x + 1, 10 + hh - barh, bw - 2, barh, duration(h.lo_ns), duration(h.hi_ns),
                     h.count, x + bw / 2, hh + 25, i % 2 ? "" : duration(h.lo_ns));
    }
    fmt::format_to(it,
                   "<text x=\"0\" y=\"20\">pairs per log2 bucket</text><text x=\"0\" y=\"36\">"
                   "peak {}</text></svg>\n",
                   peak);
  }

  // Timeline.
  fmt::format_to(it,
                 "<h2>Timeline of the busiest window</h2>\n<p id=\"window\">{} from {} "
                 "after the start: {} records{}</p>\n",
                 duration(window), duration(w0), window_records,
                 dropped_marks ? fmt::format(" ({} marks not drawn)", dropped_marks) : "");
  int row = 28;
  int height = static_cast<int>(threads.size()) * row + 40;
  fmt::format_to(it, "<svg id=\"timeline\" width=\"{:.0f}\" height=\"{}\">", kChartX + kChartW + 10,
                 height);
  for (size_t t = 0; t < threads.size(); ++t) {
    fmt::format_to(it,
                   "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>"
                   "<text x=\"4\" y=\"{}\">{} {}</text>",
                   kChartX, t * row + 2, kChartW, row - 4, t % 2 ? "#f4f4f4" : "#fafafa",
                   t * row + row / 2 + 4, threads[t].info.tid, html(threads[t].info.name));
  }
  for (int i = 0; i <= 10; ++i) {
    double x = kChartX + kChartW * i / 10;
    fmt::format_to(it,
                   "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"0\" y2=\"{1}\" stroke=\"#ddd\"/>"
                   "<text x=\"{0:.1f}\" y=\"{2}\" text-anchor=\"middle\">+{3}</text>",
                   x, height - 25, height - 8, duration(window * i / 10));
  }
  for (const Mark& m : marks) {
    double x0 = kChartX + kChartW * double(m.t0 - w0) / window;
    double y = m.thread * row + 4;
    if (m.slice) {
      double x1 = kChartX + kChartW * double(m.t1 - w0) / window;
      fmt::format_to(it,
                     "<rect class=\"slice\" x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" "
                     "fill=\"{}\" fill-opacity=\"0.6\"/>",
                     x0, y + 8, std::max(0.5, x1 - x0), row - 16, color(m.event));
    } else {
      fmt::format_to(it,
                     "<line class=\"tick\" x1=\"{0:.2f}\" x2=\"{0:.2f}\" y1=\"{1}\" y2=\"{2}\" "
                     "stroke=\"{3}\"/>",
                     x0, y, y + row - 8, color(m.event + 3));
    }
  }
  b.append(std::string_view("</svg>\n<p>"));
  for (size_t p = 0; p < resolved.size(); ++p) {
    fmt::format_to(it, "<span style=\"color:{}\">&#9632; {}</span> ", color(p),
                   html(resolved[p].rule.label()));
  }
  b.append(std::string_view("(slices); other records are drawn as ticks.</p>\n</body></html>\n"));
  st = out.close();
  if (!st.ok()) return st;
  ReportSummary summary;
  summary.records = records;
  summary.lost = lost;
  summary.pairs = static_cast<uint32_t>(matchers.size());
  summary.window_begin_ns = w0;
  summary.window_records = window_records;
  return summary;
}

}  // namespace nanotrace
