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

std::string verdict(const DiffMetric& m, const DiffSubject& s, const DiffReport& r) {
  if (m.significant) return "<b>changed</b>";
  if (!m.tested) return html(m.why);
  if (m.name == "mean" && s.kind != "benchmark") return "ranks findings, does not decide";
  if (std::fabs(m.relative) * 100 < r.options.min_change_percent) {
    return fmt::format("below the {:g} % a finding needs", r.options.min_change_percent);
  }
  if (m.observed) {
    return r.attributable ? "differs within runs, not beyond the variation between runs"
                          : "<b>observed, not attributable</b>";
  }
  return "no significant change";
}

std::string interval(const DiffMetric& m, const DiffEstimate& e) {
  return m.tested ? fmt::format("{:+.1f} % to {:+.1f} %", e.rel_lo * 100, e.rel_hi * 100) : "-";
}

void write_metrics(fmt::memory_buffer& b, const DiffSubject& s, const DiffReport& r) {
  auto it = std::back_inserter(b);
  fmt::format_to(it,
                 "<table class=\"metrics\"><tr><th class=\"l\">metric</th><th>A</th><th>B</th>"
                 "<th>change</th><th>{:g} % interval between runs</th><th>p</th><th>{:g} % "
                 "interval within runs</th><th>p</th><th class=\"l\">verdict</th></tr>\n",
                 r.options.level * 100, r.options.level * 100);
  for (const DiffMetric& m : s.metrics) {
    const bool between = m.tested && r.attributable;
    fmt::format_to(it,
                   "<tr{}><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{:+.1f} % ({})</td>"
                   "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>\n",
                   m.significant ? " class=\"sig\""
                   : m.observed  ? " class=\"obs\""
                                 : "",
                   m.name, diff_duration(m.a, s.unit), diff_duration(m.b, s.unit), m.relative * 100,
                   diff_duration(m.delta, s.unit, true), between ? interval(m, m.between) : "-",
                   between ? fmt::format("{:.2g}", m.between.p) : "-", interval(m, m.within),
                   m.tested ? fmt::format("{:.2g}", m.within.p) : "-", verdict(m, s, r));
  }
  b.append(std::string_view("</table>\n"));
}

void write_subject(fmt::memory_buffer& b, const DiffSubject& s, size_t index, const DiffReport& r) {
  auto it = std::back_inserter(b);
  fmt::format_to(it,
                 "<h3 id=\"subject-{}\">{}: {}</h3>\n<p>{} samples in {} run{} (A), {} in {} "
                 "run{} (B).</p>\n",
                 index, html(s.kind), html(s.name), s.count_a, s.runs_a, s.runs_a == 1 ? "" : "s",
                 s.count_b, s.runs_b, s.runs_b == 1 ? "" : "s");
  write_metrics(b, s, r);
  if (s.unit != "ns" || s.a.histogram.empty() || s.b.histogram.empty()) return;
  const uint64_t lo = std::min(s.a.histogram.front().lo_ns, s.b.histogram.front().lo_ns);
  const uint64_t hi = std::max(s.a.histogram.back().hi_ns, s.b.histogram.back().hi_ns);
  b.append(std::string_view("<table class=\"sides\"><tr><th>A</th><th>B</th></tr><tr><td>"));
  report::render_histogram(b, spread(s.a, lo, hi), 0);
  b.append(std::string_view("</td><td>"));
  report::render_histogram(b, spread(s.b, lo, hi), 1);
  b.append(std::string_view("</td></tr></table>\n"));
}

// A ranking: the findings ("ranked"), the tail findings ("tail") or the changes observed that
// are not findings ("observed").
void write_ranked(fmt::memory_buffer& b, const DiffReport& r, const std::vector<size_t>& ranked,
                  const char* id) {
  const bool tail = std::string_view(id) == "tail";
  auto it = std::back_inserter(b);
  fmt::format_to(it,
                 "<table class=\"ranked\" id=\"{}\"><tr><th>#</th><th class=\"l\">kind</th>"
                 "<th class=\"l\">subject</th><th>{}</th><th>p50</th><th>p99</th></tr>\n",
                 id, tail ? "slowest 1 % adds per run" : "adds per run (count x delta mean)");
  for (size_t k = 0; k < ranked.size(); ++k) {
    const DiffSubject& s = r.subjects[ranked[k]];
    auto cell = [&](const char* name) {
      for (const DiffMetric& m : s.metrics) {
        if (m.name == name) {
          return fmt::format("{:+.1f} %{}", m.relative * 100,
                             m.significant ? " *"
                             : m.observed  ? " o"
                                           : "");
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

void write_head(fmt::memory_buffer& b, const DiffReport& r) {
  auto it = std::back_inserter(b);
  const std::string title = "nanotrace diff";
  fmt::format_to(
      it,
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n"
      "<style>body{{font-family:sans-serif;margin:20px;color:#222}}"
      "table{{border-collapse:collapse;margin:8px 0}}td,th{{border:1px solid #ccc;"
      "padding:3px 8px;text-align:right}}th{{background:#eee}}td.l,th.l{{text-align:left}}"
      "h2{{margin-top:28px}}svg text{{font-size:11px;font-family:sans-serif}}"
      "tr.sig td{{background:#fff2d8}}tr.obs td{{background:#eef3fb}}"
      "table.sides td{{vertical-align:top;border:none}}"
      "p.headline{{font-size:1.15em;font-weight:bold}}"
      "p.warning{{border:2px solid #c60;padding:6px 10px;background:#fff6ec}}"
      "</style></head><body>\n<h1>{}</h1>\n",
      title, title);
  fmt::format_to(it, "<p>A: {} ({} run{})<br>B: {} ({} run{})</p>\n",
                 html(fmt::to_string(fmt::join(r.a, ", "))), r.a.size(), r.a.size() == 1 ? "" : "s",
                 html(fmt::to_string(fmt::join(r.b, ", "))), r.b.size(),
                 r.b.size() == 1 ? "" : "s");
  fmt::format_to(it, "<p class=\"headline\" id=\"headline\">{}</p>\n", html(diff_headline(r)));
  if (!r.attributable) {
    b.append(std::string_view(
        "<p class=\"warning\" id=\"attribution\"><b>Not attributable.</b> With one run a side the "
        "variation between runs (another load, CPU state or file layout: on a shared machine "
        "the largest term) cannot be measured, so no change can be told from it. What differs "
        "beyond the runs' own sampling noise is shown as <i>observed</i>, with within-run "
        "intervals. Give several runs a side (A1,A2,A3) for findings.</p>\n"));
  }
  fmt::format_to(
      it,
      "<p>Statistics: a side's value of a metric is the geometric mean over its runs of each "
      "run's value. Between runs: {}. Within runs: a block bootstrap ({} resamples, blocks of "
      "consecutive samples). Each test asks whether the change is at least {:g} % of A's "
      "value; Holm's correction over {} quantile tests at family-wise level {:g}; the mean "
      "ranks findings but does not decide (a heavy tail leaves it no reliable interval).</p>\n",
      r.attributable
          ? fmt::format("a t-test over the runs, {:g} degrees of freedom", r.degrees_of_freedom)
          : "not measurable with one run a side",
      r.options.resamples, r.options.min_change_percent, r.tests, r.options.alpha);
}

void write_events(fmt::memory_buffer& b, const DiffReport& r) {
  if (r.events.empty()) return;
  auto it = std::back_inserter(b);
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

}  // namespace

Status write_diff_html(const DiffReport& r, const std::string& path) {
  exporter::OutFile out;
  if (Status st = out.open(path); !st.ok()) return st;
  fmt::memory_buffer& b = out.buf();
  write_head(b, r);
  if (!r.ranked.empty()) {
    b.append(std::string_view("<h2>Findings</h2>\n"));
    write_ranked(b, r, r.ranked, "ranked");
  }
  if (!r.tail_ranked.empty()) {
    b.append(std::string_view("<h2>Tail findings</h2>\n"));
    write_ranked(b, r, r.tail_ranked, "tail");
  }
  if (!r.observed_ranked.empty()) {
    b.append(std::string_view(
        r.attributable ? "<h2>Beyond the runs' own noise, within the variation between runs (not "
                         "findings)</h2>\n"
                       : "<h2>Observed, not attributable (one run a side)</h2>\n"));
    write_ranked(b, r, r.observed_ranked, "observed");
  }
  if (!r.subjects.empty()) b.append(std::string_view("<h2>Every subject</h2>\n"));
  for (size_t i = 0; i < r.subjects.size(); ++i) write_subject(b, r.subjects[i], i, r);
  write_events(b, r);
  auto it = std::back_inserter(b);
  for (const std::string& n : r.notes) fmt::format_to(it, "<p class=\"note\">{}</p>\n", html(n));
  b.append(std::string_view("</body></html>\n"));
  return out.close();
}

}  // namespace nanotrace
