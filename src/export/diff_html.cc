// write_diff_html: the diff's page. Histograms reuse the report's (report_charts.hpp), drawn
// for A and B over the same buckets so that their bars line up; colours are the report's
// first two pair colours (A, B).
#include "nanotrace/diff_html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "export/output.hpp"
#include "export/report_charts.hpp"
#include "export/report_text.hpp"

namespace nanotrace {
namespace {

using report::html;

// s with its histogram spread over the buckets [lo, hi) of both sides (missing ones empty).
LatencyStats spread(const LatencyStats& s, uint64_t lo, uint64_t hi) {
  LatencyStats out = s;
  out.histogram.clear();
  for (uint64_t edge = lo; edge < hi || out.histogram.empty();) {
    HistogramBucket b;
    b.lo_ns = edge;
    b.hi_ns = edge == 0 ? 1 : (edge >= (uint64_t{1} << 63) ? UINT64_MAX : edge * 2);
    for (const HistogramBucket& h : s.histogram) {
      if (h.lo_ns == b.lo_ns) b.count = h.count;
    }
    out.histogram.push_back(b);
    if (b.hi_ns == UINT64_MAX) break;
    edge = b.hi_ns;
  }
  return out;
}

void write_metrics(fmt::memory_buffer& b, const DiffSubject& s, double level, double min_change) {
  auto it = std::back_inserter(b);
  fmt::format_to(it,
                 "<table class=\"metrics\"><tr><th class=\"l\">metric</th><th>A</th><th>B</th>"
                 "<th>change</th><th>{:g} % interval</th><th>p</th><th class=\"l\">verdict</th>"
                 "</tr>\n",
                 level * 100);
  for (const DiffMetric& m : s.metrics) {
    std::string verdict;
    if (m.significant) {
      verdict = "<b>changed</b>";
    } else if (!m.tested) {
      verdict = html(m.why);
    } else if (m.name == "mean" && s.kind != "benchmark") {
      verdict = "ranks findings, does not decide";
    } else if (std::fabs(m.relative) < min_change) {
      verdict = fmt::format("below the {:g} % reported", min_change * 100);
    } else {
      verdict = "no significant change";
    }
    fmt::format_to(
        it,
        "<tr{}><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{:+.1f} % ({})</td>"
        "<td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>\n",
        m.significant ? " class=\"sig\"" : "", m.name, diff_duration(m.a, s.unit),
        diff_duration(m.b, s.unit), m.relative * 100, diff_duration(m.delta, s.unit, true),
        m.tested ? fmt::format("{:+.1f} % to {:+.1f} %", m.rel_lo * 100, m.rel_hi * 100) : "-",
        m.tested ? fmt::format("{:.2g}", m.p) : "-", verdict);
  }
  b.append(std::string_view("</table>\n"));
}

void write_subject(fmt::memory_buffer& b, const DiffSubject& s, size_t index, double level,
                   double min_change) {
  auto it = std::back_inserter(b);
  fmt::format_to(it,
                 "<h3 id=\"subject-{}\">{}: {}</h3>\n<p>{} samples in {} run{} (A), {} in {} "
                 "run{} (B).</p>\n",
                 index, html(s.kind), html(s.name), s.count_a, s.runs_a, s.runs_a == 1 ? "" : "s",
                 s.count_b, s.runs_b, s.runs_b == 1 ? "" : "s");
  write_metrics(b, s, level, min_change);
  if (s.unit != "ns" || s.a.histogram.empty() || s.b.histogram.empty()) return;
  const uint64_t lo = std::min(s.a.histogram.front().lo_ns, s.b.histogram.front().lo_ns);
  const uint64_t hi = std::max(s.a.histogram.back().hi_ns, s.b.histogram.back().hi_ns);
  b.append(std::string_view("<table class=\"sides\"><tr><th>A</th><th>B</th></tr><tr><td>"));
  report::render_histogram(b, spread(s.a, lo, hi), 0);
  b.append(std::string_view("</td><td>"));
  report::render_histogram(b, spread(s.b, lo, hi), 1);
  b.append(std::string_view("</td></tr></table>\n"));
}

void write_ranked(fmt::memory_buffer& b, const DiffReport& r, const std::vector<size_t>& ranked,
                  bool tail) {
  auto it = std::back_inserter(b);
  fmt::format_to(it,
                 "<table class=\"ranked\" id=\"{}\"><tr><th>#</th><th class=\"l\">kind</th>"
                 "<th class=\"l\">subject</th><th>{}</th><th>p50</th><th>p99</th></tr>\n",
                 tail ? "tail" : "ranked",
                 tail ? "slowest 1 % adds per run" : "adds per run (count x delta mean)");
  for (size_t k = 0; k < ranked.size(); ++k) {
    const DiffSubject& s = r.subjects[ranked[k]];
    auto cell = [&](const char* name) {
      for (const DiffMetric& m : s.metrics) {
        if (m.name == name) {
          return fmt::format("{:+.1f} %{}", m.relative * 100, m.significant ? " *" : "");
        }
      }
      return std::string("-");
    };
    fmt::format_to(it,
                   "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\"><a href=\"#subject-{}"
                   "\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                   k + 1, html(s.kind), ranked[k], html(s.name),
                   diff_duration(tail ? s.tail_added : s.added, s.unit, true), cell("p50"),
                   cell("p99"));
  }
  b.append(std::string_view("</table>\n"));
}

}  // namespace

Status write_diff_html(const DiffReport& r, const std::string& path) {
  exporter::OutFile out;
  if (Status st = out.open(path); !st.ok()) return st;
  fmt::memory_buffer& b = out.buf();
  auto it = std::back_inserter(b);
  const std::string title = "nanotrace diff";
  fmt::format_to(
      it,
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n"
      "<style>body{{font-family:sans-serif;margin:20px;color:#222}}"
      "table{{border-collapse:collapse;margin:8px 0}}td,th{{border:1px solid #ccc;"
      "padding:3px 8px;text-align:right}}th{{background:#eee}}td.l,th.l{{text-align:left}}"
      "h2{{margin-top:28px}}svg text{{font-size:11px;font-family:sans-serif}}"
      "tr.sig td{{background:#fff2d8}}table.sides td{{vertical-align:top;border:none}}"
      "p.headline{{font-size:1.15em;font-weight:bold}}</style></head><body>\n<h1>{}</h1>\n",
      title, title);
  fmt::format_to(it, "<p>A: {} ({} run{})<br>B: {} ({} run{})</p>\n",
                 html(fmt::to_string(fmt::join(r.a, ", "))), r.a.size(), r.a.size() == 1 ? "" : "s",
                 html(fmt::to_string(fmt::join(r.b, ", "))), r.b.size(),
                 r.b.size() == 1 ? "" : "s");
  fmt::format_to(it, "<p class=\"headline\" id=\"headline\">{}</p>\n", html(diff_headline(r)));
  fmt::format_to(
      it,
      "<p>Statistics: a hierarchical block bootstrap ({} resamples: runs, then blocks of "
      "consecutive samples), Holm's correction over {} quantile tests at family-wise level "
      "{:g}; changes below {:g} % are not reported; the mean ranks findings but does not decide "
      "(a heavy tail leaves it no reliable interval).</p>\n",
      r.options.resamples, r.tests, r.options.alpha, r.options.min_change * 100);
  if (!r.ranked.empty()) {
    b.append(std::string_view("<h2>Findings</h2>\n"));
    write_ranked(b, r, r.ranked, false);
  }
  if (!r.tail_ranked.empty()) {
    b.append(std::string_view("<h2>Tail findings</h2>\n"));
    write_ranked(b, r, r.tail_ranked, true);
  }
  if (!r.subjects.empty()) b.append(std::string_view("<h2>Every subject</h2>\n"));
  for (size_t i = 0; i < r.subjects.size(); ++i)
    write_subject(b, r.subjects[i], i, r.options.level, r.options.min_change);
  if (!r.events.empty()) {
    b.append(std::string_view(
        "<h2>Events</h2>\n<table id=\"events\"><tr><th class=\"l\">event</th><th>A per run</th>"
        "<th>B per run</th><th>A per second</th><th>B per second</th></tr>\n"));
    for (const DiffEvent& e : r.events) {
      fmt::format_to(it,
                     "<tr><td class=\"l\">{}</td><td>{:.0f}</td><td>{:.0f}</td><td>{:.0f}</td>"
                     "<td>{:.0f}</td></tr>\n",
                     html(e.event), e.count_a, e.count_b, e.rate_a, e.rate_b);
    }
    b.append(std::string_view("</table>\n"));
  }
  for (const std::string& n : r.notes) fmt::format_to(it, "<p class=\"note\">{}</p>\n", html(n));
  b.append(std::string_view("</body></html>\n"));
  return out.close();
}

}  // namespace nanotrace
