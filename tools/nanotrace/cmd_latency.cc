// `nanotrace latency`: latency of begin/end pairs with exact percentiles, a log2 histogram
// drawn in the terminal, an optional split by a begin-event field and the slowest pairs.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "analysis_commands.hpp"
#include "base/utf8.hpp"
#include "commands.hpp"
#include "nanotrace/analysis.hpp"

namespace nanotrace::cli {
namespace {

std::string human(uint64_t ns) {
  if (ns < 1000) return fmt::format("{}ns", ns);
  if (ns < 1000000) return fmt::format("{:.1f}us", ns / 1e3);
  if (ns < 1000000000) return fmt::format("{:.1f}ms", ns / 1e6);
  return fmt::format("{:.2f}s", ns / 1e9);
}

nlohmann::json stats_json(const LatencyStats& s) {
  nlohmann::json h = nlohmann::json::array();
  for (const HistogramBucket& b : s.histogram) {
    h.push_back({{"lo_ns", b.lo_ns}, {"hi_ns", b.hi_ns}, {"count", b.count}});
  }
  return {{"count", s.count},     {"unmatched_begins", s.unmatched_begins},
          {"min_ns", s.min_ns},   {"p50_ns", s.p50_ns},
          {"p90_ns", s.p90_ns},   {"p99_ns", s.p99_ns},
          {"p999_ns", s.p999_ns}, {"max_ns", s.max_ns},
          {"mean_ns", s.mean_ns}, {"histogram", h}};
}

void print_row(const std::string& label, const LatencyStats& s) {
  fmt::print("{:<16} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}\n", label, s.count,
             human(s.min_ns), human(s.p50_ns), human(s.p90_ns), human(s.p99_ns), human(s.p999_ns),
             human(s.max_ns), human(static_cast<uint64_t>(s.mean_ns)), s.unmatched_begins);
}

void print_histogram(const LatencyStats& s) {
  uint64_t peak = 1;
  for (const HistogramBucket& b : s.histogram) peak = std::max(peak, b.count);
  for (const HistogramBucket& b : s.histogram) {
    size_t bar = static_cast<size_t>((b.count * 50 + peak - 1) / peak);
    fmt::print("  [{:>8}, {:>8})  {:<50} {}\n", human(b.lo_ns), human(b.hi_ns),
               std::string(bar, '#'), b.count);
  }
}

void print_report_json(const LatencyReport& rep) {
  nlohmann::json j = {{"begin", utf8::valid(rep.rule.begin)},
                      {"end", utf8::valid(rep.rule.end)},
                      {"key", utf8::valid(rep.rule.key)},
                      {"by", utf8::valid(rep.by)},
                      {"records", rep.records},
                      {"begins", rep.begins},
                      {"ends", rep.ends},
                      {"unmatched_ends", rep.unmatched_ends},
                      {"lost", rep.lost},
                      {"kernel_lost", rep.kernel_lost},
                      {"corrupt_blocks", rep.corrupt_blocks},
                      {"lost_adjacent_pairs", rep.lost_adjacent_pairs},
                      {"lost_adjacent_unmatched", rep.lost_adjacent_unmatched},
                      {"overall", stats_json(rep.overall)}};
  nlohmann::json groups = nlohmann::json::array();
  for (const LatencyStats& g : rep.groups) {
    nlohmann::json gj = stats_json(g);
    gj["value"] = utf8::valid(g.by_value);
    groups.push_back(gj);
  }
  j["groups"] = groups;
  nlohmann::json top = nlohmann::json::array();
  for (const SlowPair& p : rep.top) {
    top.push_back({{"latency_ns", p.latency_ns},
                   {"begin_ns", p.begin_ns},
                   {"begin_realtime_ns", p.begin_realtime_ns},
                   {"pid", p.pid},
                   {"tid", p.tid},
                   {"thread", utf8::valid(p.thread)},
                   {"key", utf8::valid(p.key)},
                   {"by", utf8::valid(p.by_value)}});
  }
  j["top"] = top;
  fmt::print("{}\n", dump_json(j));
}

// What was matched, and what the trace lost that may have unmatched some records.
void print_report_header(const LatencyReport& rep) {
  fmt::print("{} -> {} matched on {}: {} pairs, {} unmatched begins, {} unmatched ends\n",
             utf8::escape_text(rep.rule.begin), utf8::escape_text(rep.rule.end),
             utf8::escape_text(rep.rule.key), rep.overall.count, rep.overall.unmatched_begins,
             rep.unmatched_ends);
  if (rep.lost > 0 || rep.corrupt_blocks > 0) {
    fmt::print(
        "the trace lost {} records{}: unmatched records may have lost their partner\n", rep.lost,
        rep.corrupt_blocks ? fmt::format(" ({} corrupt blocks skipped)", rep.corrupt_blocks) : "");
  }
  if (rep.kernel_lost > 0) {
    fmt::print("ftrace lost {} kernel events: unmatched records may have lost their partner\n",
               rep.kernel_lost);
  }
  if (rep.lost_adjacent_pairs > 0 || rep.lost_adjacent_unmatched > 0) {
    fmt::print(
        "{} pairs span a loss (they may pair the wrong records), {} unmatched records are "
        "next to one\n",
        rep.lost_adjacent_pairs, rep.lost_adjacent_unmatched);
  }
}

// The slowest pairs; processes: the trace has several (`nanotrace run`), so name the process.
void print_slowest_pairs(const LatencyReport& rep, bool processes) {
  fmt::print("\nslowest {} pairs (begin time as `nanotrace dump` prints it):\n", rep.top.size());
  fmt::print("  {:>10} {:>15} {}{:>7} {:<15} {:<20}{}\n", "latency", "begin_ns",
             processes ? fmt::format("{:>7} ", "pid") : "", "tid", "thread", "key",
             rep.by.empty() ? "" : " " + utf8::escape_text(rep.by));
  for (const SlowPair& p : rep.top) {
    fmt::print("  {:>10} {:>15} {}{:>7} {:<15} {:<20}{}\n", human(p.latency_ns), p.begin_ns,
               processes ? fmt::format("{:>7} ", p.pid) : "", p.tid, utf8::escape_text(p.thread),
               utf8::escape_text(p.key), rep.by.empty() ? "" : " " + utf8::escape_text(p.by_value));
  }
}

void print_report_text(const LatencyReport& rep, bool processes) {
  print_report_header(rep);
  fmt::print("percentiles: nearest rank over all {} latencies (exact)\n\n", rep.overall.count);
  fmt::print("{:<16} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
             utf8::escape_text(rep.by), "count", "min", "p50", "p90", "p99", "p99.9", "max", "mean",
             "unmatched");
  print_row("all", rep.overall);
  for (const LatencyStats& g : rep.groups) print_row(utf8::escape_text(g.by_value), g);
  fmt::print("\nhistogram (all, log2 buckets):\n");
  print_histogram(rep.overall);
  if (!rep.top.empty()) print_slowest_pairs(rep, processes);
}

}  // namespace

int cmd_latency(const LatencyArgs& args) {
  auto opened = open_source(args.source);
  if (!opened.ok()) return fail(opened.status());
  LatencyOptions options;
  options.rule = PairRule{args.begin, args.end, args.key};
  options.by = args.by;
  options.top = args.top;
  auto result = analyze_latency(**opened, options);
  if (!result.ok()) return fail(result.status());
  if (args.json) {
    print_report_json(*result);
  } else {
    print_report_text(*result, (*opened)->processes().size() > 1);
  }
  return 0;
}

}  // namespace nanotrace::cli
