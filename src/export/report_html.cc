// `nanotrace report`: one self-contained HTML page (inline CSS and SVG, no script, no
// external resource) summarising a trace: totals and rates, losses per thread, counts per
// event, a latency table and histogram per begin/end pair rule, and two timelines that
// account for every record: the whole trace, and its busiest window (report_timeline.hpp).
//
// Two streamed passes. The first counts records per event and per thread, and finds the
// busiest window with a sliding sum over time bins (at most 1 Mi bins, coarsened as the
// trace grows); the default pair rules are then chosen among the events that occurred. The
// second pass matches pairs (one IntervalMatcher over every rule) and fills the timelines.
// Memory: the latencies of the pairs (8 bytes each), the bins, and the timelines' cells.
// Output: bounded by the timelines' cells (rows x columns), not by the records.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/output_file.hpp"
#include "export/output.hpp"
#include "export/report_charts.hpp"
#include "export/report_text.hpp"
#include "export/report_timeline.hpp"
#include "nanotrace/intervals.hpp"
#include "nanotrace/report.hpp"

namespace nanotrace {
namespace {

using report::duration;
using report::html;

constexpr size_t kMaxBins = 1 << 20;

// What the first pass finds.
struct FirstPass {
  std::vector<uint64_t> per_event;   // by event id
  std::vector<uint64_t> per_thread;  // by reader thread index
  std::vector<ThreadStats> threads;
  std::vector<uint64_t> bins;  // records per bin_ns
  uint64_t bin_ns = 1;
  uint64_t first_ns = 0, last_ns = 0, records = 0;
};

// Events are counted by slot (TimelineContext::slot_of): user-space ids, then kernel events.
uint32_t kernel_base(const Trace& trace) {
  return static_cast<uint32_t>(trace.events().size() + 1);
}
size_t event_slots(const Trace& trace) { return kernel_base(trace) + trace.kernel_events().size(); }

FirstPass count_records(Trace& trace, uint64_t window, const report::TimelineContext& ctx) {
  FirstPass p;
  p.per_event.assign(event_slots(trace), 0);
  p.bin_ns = std::max<uint64_t>(window / 10, 1);
  auto source = trace.read_all_with_kernel();
  Record r;
  while (source->next(&r)) {
    if (p.records == 0) p.first_ns = r.time_ns;
    p.last_ns = std::max(p.last_ns, r.time_ns);
    ++p.records;
    ++p.per_event[ctx.slot_of(*r.event)];
    if (r.thread >= p.per_thread.size()) p.per_thread.resize(r.thread + 1, 0);
    ++p.per_thread[r.thread];
    uint64_t b = r.time_ns / p.bin_ns;
    while (b >= kMaxBins) {
      for (size_t i = 0; i < p.bins.size(); ++i) {
        p.bins[i / 2] = (i % 2 ? p.bins[i / 2] : 0) + p.bins[i];
      }
      p.bins.resize((p.bins.size() + 1) / 2);
      p.bin_ns *= 2;
      b = r.time_ns / p.bin_ns;
    }
    if (b >= p.bins.size()) p.bins.resize(b + 1, 0);
    ++p.bins[b];
  }
  p.threads = source->threads();
  return p;
}

// Start of the window of `window` ns holding the most records.
uint64_t busiest_window(const FirstPass& p, uint64_t window) {
  size_t span = std::max<uint64_t>(1, (window + p.bin_ns - 1) / p.bin_ns);
  uint64_t best = 0, sum = 0;
  size_t best_at = 0;
  for (size_t i = 0; i < p.bins.size(); ++i) {
    sum += p.bins[i];
    if (i >= span) sum -= p.bins[i - span];
    if (sum > best) {
      best = sum;
      best_at = i + 1 >= span ? i + 1 - span : 0;
    }
  }
  return std::max<uint64_t>(best_at * p.bin_ns, p.first_ns);
}

// Records per event name (one name may cover several call sites), most first.
std::vector<std::pair<std::string, uint64_t>> counts_by_name(
    const Trace& trace, const report::TimelineContext& ctx, const std::vector<uint64_t>& per_slot) {
  std::map<std::string, uint64_t> by_name;
  for (const auto* list : {&trace.events(), &trace.kernel_events()}) {
    for (const EventInfo& e : *list) {
      const uint32_t slot = ctx.slot_of(e);
      if (slot < per_slot.size() && per_slot[slot] > 0) by_name[e.full_name()] += per_slot[slot];
    }
  }
  std::vector<std::pair<std::string, uint64_t>> counts(by_name.begin(), by_name.end());
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& c) { return a.second > c.second; });
  return counts;
}

// The events' colours: the busiest names get the palette, the others share kOtherEvent.
void choose_event_colors(const Trace& trace,
                         const std::vector<std::pair<std::string, uint64_t>>& counts,
                         report::TimelineContext* ctx, std::vector<report::LegendEntry>* legend) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < counts.size() && i < report::kEventColors; ++i) {
    index[counts[i].first] = static_cast<int>(i);
    legend->push_back({report::event_color(static_cast<int>(i)), counts[i].first});
  }
  if (counts.size() > report::kEventColors) {
    size_t others = counts.size() - report::kEventColors;
    legend->push_back(
        {report::kOtherEvent, fmt::format("{} other event{}", others, others == 1 ? "" : "s")});
  }
  ctx->event_color.assign(event_slots(trace), -1);
  ctx->event_name.assign(event_slots(trace), "?");
  for (const auto* list : {&trace.events(), &trace.kernel_events()}) {
    for (const EventInfo& e : *list) {
      const uint32_t slot = ctx->slot_of(e);
      if (slot >= ctx->event_color.size()) continue;
      auto it = index.find(e.full_name());
      if (it != index.end()) ctx->event_color[slot] = it->second;
      ctx->event_name[slot] = html(e.full_name(), 64);
    }
  }
}

struct PageData {
  std::vector<ThreadStats> threads;  // second pass
  std::vector<uint64_t> per_event;   // second pass
  uint64_t records = 0, late_records = 0, lost = 0;
  bool inferred = false;  // the pair rules were inferred from the event names
  std::vector<ResolvedPair> rules;
  std::vector<IntervalCounts> counts;
  std::vector<LatencyStats> latency;
  std::vector<report::LegendEntry> event_legend, rule_legend;
};

// The page's two timelines, over the same rows: the whole trace, and its busiest window.
struct Timelines {
  report::RowSet rows;
  report::Timeline overview, busiest;
  uint64_t window_begin, window_end;
};

void write_summary(fmt::memory_buffer& b, const Trace& trace, const PageData& d,
                   uint64_t duration_ns) {
  auto it = std::back_inserter(b);
  const ProcessInfo& proc = trace.process();
  double rate = duration_ns > 0 ? static_cast<double>(d.records) * 1e9 / duration_ns : 0;
  fmt::format_to(it,
                 "<h2>Summary</h2>\n<table id=\"summary\">"
                 "<tr><th class=\"l\">segment</th><td class=\"l\">{}</td></tr>"
                 "<tr><th class=\"l\">mode</th><td class=\"l\">{}</td></tr>"
                 "<tr><th class=\"l\">duration</th><td id=\"duration\" data-ns=\"{}\">{}</td></tr>"
                 "<tr><th class=\"l\">records</th><td id=\"records\">{}</td></tr>"
                 "<tr><th class=\"l\">rate</th><td id=\"rate\">{:.0f} records/s</td></tr>"
                 "<tr><th class=\"l\">lost</th><td id=\"lost\">{}</td></tr>"
                 "<tr><th class=\"l\">threads</th><td id=\"threads\">{}</td></tr></table>\n",
                 html(proc.path), mode_name(proc.mode), duration_ns, duration(duration_ns),
                 d.records, rate, d.lost, d.threads.size());
  if (d.late_records > 0) {
    fmt::format_to(it,
                   "<p id=\"late\">{} records written while the report was read (the process "
                   "is live) are left out.</p>\n",
                   d.late_records);
  }
  b.append(
      std::string_view("<h2>Threads</h2>\n<table id=\"thread-table\"><tr><th>tid</th>"
                       "<th class=\"l\">name</th><th>records</th><th>overwritten</th>"
                       "<th>dropped</th></tr>"));
  for (const ThreadStats& t : d.threads) {
    // A CPU's kernel events are a row of their own: "kernel", "cpuN".
    fmt::format_to(it,
                   "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                   t.info.kernel ? std::string("kernel") : std::to_string(t.info.tid),
                   html(t.info.name), t.records, t.overwritten, t.dropped);
  }
  b.append(
      std::string_view("</table>\n<h2>Events</h2>\n<table id=\"event-table\"><tr>"
                       "<th class=\"l\">event</th><th>records</th><th>share</th></tr>"));
  report::TimelineContext slots;
  slots.kernel_base = kernel_base(trace);
  for (const auto& [name, n] : counts_by_name(trace, slots, d.per_event)) {
    double share = 100.0 * static_cast<double>(n) / static_cast<double>(d.records);
    fmt::format_to(it,
                   "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\"><svg width=\"204\" "
                   "height=\"12\"><rect class=\"bar\" x=\"0\" y=\"1\" width=\"{:.1f}\" "
                   "height=\"10\"/></svg> {:.1f}%</td></tr>",
                   html(name), n, share * 2, share);
  }
  b.append(std::string_view("</table>\n"));
}

void write_latency(fmt::memory_buffer& b, const PageData& d) {
  auto it = std::back_inserter(b);
  b.append(std::string_view("<h2>Latency</h2>\n"));
  if (d.rules.empty()) {
    b.append(std::string_view(
        "<p id=\"no-pairs\">No begin/end pairs given (--pair), and no pair of events "
        "inferred from their names has records of both its begin and its end.</p>\n"));
  } else if (d.inferred) {
    b.append(std::string_view(
        "<p>Pairs inferred from event names, among the events that have records (give "
        "others with --pair BEGIN,END,KEY).</p>\n"));
  }
  for (size_t p = 0; p < d.rules.size(); ++p) {
    const LatencyStats& s = d.latency[p];
    const IntervalCounts& c = d.counts[p];
    fmt::format_to(it,
                   "<h3><span class=\"swatch\" style=\"background:{}\"></span>{}</h3>\n"
                   "<table class=\"latency\"><tr><th>pairs</th><th>unmatched begins</th>"
                   "<th>unmatched ends</th><th>next to a loss</th>",
                   report::rule_color(p), html(d.rules[p].rule.label()));
    if (s.count == 0) {
      fmt::format_to(it,
                     "<th class=\"l\">latency</th></tr><tr><td>0</td><td>{}</td><td>{}</td>"
                     "<td>{}</td><td class=\"l\">no pair matched ({} begin records, {} end "
                     "records)</td></tr></table>\n",
                     c.unmatched_begins, c.unmatched_ends,
                     c.lost_adjacent_pairs + c.lost_adjacent_unmatched, c.begins, c.ends);
      continue;
    }
    fmt::format_to(it,
                   "<th>min</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th>"
                   "</tr><tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                   "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>\n",
                   s.count, c.unmatched_begins, c.unmatched_ends,
                   c.lost_adjacent_pairs + c.lost_adjacent_unmatched, duration(s.min_ns),
                   duration(s.p50_ns), duration(s.p90_ns), duration(s.p99_ns), duration(s.p999_ns),
                   duration(s.max_ns));
    report::render_histogram(b, s, p);
  }
}

void write_timelines(fmt::memory_buffer& b, const FirstPass& first, const PageData& d,
                     const Timelines& t, const report::TimelineContext& ctx) {
  auto it = std::back_inserter(b);
  const uint64_t window = t.window_end - t.window_begin;
  b.append(std::string_view("<h2>Timelines</h2>\n"));
  report::render_legend(b, d.event_legend, d.rule_legend);
  fmt::format_to(
      it,
      "<h3>The whole trace</h3>\n<p id=\"overview-caption\">{} records over {}, "
      "{} per pixel column; the busiest window is outlined.</p>\n",
      t.overview.records(), duration(first.last_ns + 1 - first.first_ns),
      duration(std::max<uint64_t>(1, (first.last_ns + 1 - first.first_ns) / report::kColumns)));
  t.overview.render(b, t.rows, ctx, t.window_begin, t.window_end);
  fmt::format_to(
      it,
      "<h3>The busiest window</h3>\n<p id=\"window-caption\">{} from {} after the start: {} "
      "records, {} pairs, {} per pixel column.</p>\n",
      duration(window), duration(t.window_begin - first.first_ns), t.busiest.records(),
      t.busiest.pairs(), duration(std::max<uint64_t>(1, window / report::kColumns)));
  t.busiest.render(b, t.rows, ctx);
}

// Writes the page to output ("-": standard output).
Status write_page(const Trace& trace, const std::string& output, const FirstPass& first,
                  const PageData& d, const Timelines& t, const report::TimelineContext& ctx) {
  exporter::OutFile out;
  Status st = out.open(output);
  if (!st.ok()) return st;
  fmt::memory_buffer& b = out.buf();
  const ProcessInfo& proc = trace.process();
  std::string title = fmt::format("nanotrace report: {} (pid {})", proc.process_name, proc.pid);
  fmt::format_to(
      std::back_inserter(b),
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n"
      "<style>body{{font-family:sans-serif;margin:20px;color:#222}}"
      "table{{border-collapse:collapse;margin:8px 0}}td,th{{border:1px solid #ccc;"
      "padding:3px 8px;text-align:right}}th{{background:#eee}}td.l,th.l{{text-align:left}}"
      "h2{{margin-top:28px}}svg text{{font-size:11px;font-family:sans-serif}}"
      ".bar{{fill:#4a7bd0}}.swatch{{display:inline-block;width:12px;height:12px;"
      "margin-right:6px;vertical-align:middle}}.legend ul{{list-style:none;padding:0;"
      "display:flex;flex-wrap:wrap;gap:4px 18px}}.legend p{{margin:6px 0;max-width:1100px}}"
      "</style></head><body>\n<h1>{}</h1>\n",
      html(title), html(title));
  write_summary(b, trace, d, first.last_ns - first.first_ns);
  write_latency(b, d);
  write_timelines(b, first, d, t, ctx);
  b.append(std::string_view("</body></html>\n"));
  return out.close();
}

// The output is not the trace itself, and every --pair resolves.
Status check_options(Trace& trace, const ReportOptions& options) {
  if (options.output.empty()) return Status::Invalid("no output file given (-o)");
  if (options.output != "-") {
    Status same = check_not_source(options.output, trace.source_fd());
    if (!same.ok()) return same;
  }
  for (const PairRule& rule : options.pairs) {
    auto resolved = resolve_pair(trace, rule);
    if (!resolved.ok()) return resolved.status();
  }
  return Status::Ok();
}

// The pair rules (--pair, or inferred among the events that occurred), their colours, and
// the events' colours.
void choose_rules_and_colors(Trace& trace, const ReportOptions& options, const FirstPass& first,
                             report::TimelineContext* ctx, PageData* d) {
  d->inferred = options.pairs.empty();
  std::vector<PairRule> rules =
      d->inferred ? pairs_that_occur(trace, infer_pairs(trace), first.per_event) : options.pairs;
  for (const PairRule& rule : rules) {
    d->rules.push_back(std::move(resolve_pair(trace, rule)).value());
  }
  choose_event_colors(trace, counts_by_name(trace, *ctx, first.per_event), ctx, &d->event_legend);
  for (size_t p = 0; p < d->rules.size(); ++p) {
    d->rule_legend.push_back({report::rule_color(p), d->rules[p].rule.label()});
  }
  ctx->rules = &d->rules;
}

// Pass 2: pairs and timelines. A live process keeps writing: records after the first pass's
// last one are left out, so both passes describe the same records. Leaves ctx.threads at
// d->threads.
void match_pairs_and_fill_timelines(Trace& trace, uint64_t last_ns, report::TimelineContext* ctx,
                                    Timelines* t, PageData* d) {
  IntervalMatcher intervals(d->rules);
  std::vector<std::vector<uint64_t>> latencies(d->rules.size());
  d->per_event.assign(event_slots(trace), 0);
  auto source = trace.read_all_with_kernel();
  ctx->threads = &source->threads();
  Record r;
  while (source->next(&r)) {
    if (r.time_ns > last_ns) {
      ++d->late_records;
      continue;
    }
    ++d->records;
    ++d->per_event[ctx->slot_of(*r.event)];
    const uint32_t row = t->rows.row_of(r);
    t->overview.add_record(row, r, *ctx);
    if (t->busiest.covers(r.time_ns)) t->busiest.add_record(row, r, *ctx);
    if (r.event->is_kernel) continue;  // pairs are of user-space events
    for (const IntervalMatch& m : intervals.add(r)) {
      if (m.kind != IntervalMatch::Kind::kEnd) continue;
      latencies[m.rule].push_back(m.interval.latency_ns());
      const uint32_t begin_row = t->rows.row_of_thread(m.interval.begin_thread);
      t->overview.add_pair(begin_row, m.rule, m.interval, r, *ctx);
      t->busiest.add_pair(begin_row, m.rule, m.interval, r, *ctx);
    }
  }
  d->threads = source->threads();
  ctx->threads = &d->threads;
  uint64_t user_lost = 0;
  for (const ThreadStats& th : d->threads) {
    d->lost += th.lost();
    if (!th.info.kernel) user_lost += th.lost();
  }
  intervals.finish(user_lost);
  for (size_t p = 0; p < d->rules.size(); ++p) {
    d->counts.push_back(intervals.counts(static_cast<uint32_t>(p)));
    d->latency.push_back(compute_latency_stats(&latencies[p]));
  }
}

}  // namespace

Result<ReportSummary> write_html_report(Trace& trace, const ReportOptions& options) {
  if (Status s = check_options(trace, options); !s.ok()) return s;
  const uint64_t window = std::max<uint64_t>(options.window_ns, 1000);
  report::TimelineContext ctx;
  ctx.kernel_base = kernel_base(trace);
  const FirstPass first = count_records(trace, window, ctx);
  if (first.records == 0) {
    return Status::NotFound(fmt::format("the trace of process {} ({}) holds no records",
                                        trace.process().pid, trace.process().path));
  }
  PageData d;
  choose_rules_and_colors(trace, options, first, &ctx, &d);
  const uint64_t w0 = busiest_window(first, window), w1 = w0 + window;
  const bool pairs_lane = !d.rules.empty();
  report::RowSet rows =
      report::RowSet::by_thread(first.threads, first.per_thread, report::kMaxRows);
  const size_t row_count = rows.size();
  Timelines t{
      std::move(rows),
      report::Timeline("overview", first.first_ns, first.last_ns + 1, row_count, pairs_lane),
      report::Timeline("window", w0, w1, row_count, pairs_lane), w0, w1};
  match_pairs_and_fill_timelines(trace, first.last_ns, &ctx, &t, &d);
  if (Status s = write_page(trace, options.output, first, d, t, ctx); !s.ok()) return s;
  ReportSummary summary;
  summary.records = d.records;
  summary.lost = d.lost;
  summary.pairs = static_cast<uint32_t>(d.rules.size());
  summary.window_begin_ns = w0;
  summary.window_records = t.busiest.records();
  return summary;
}

}  // namespace nanotrace
