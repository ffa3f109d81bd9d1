// `nanotrace diff A B`: which part got slower between two runs (or sets of runs: A1,A2),
// by how much and how sure (nanotrace/diff.hpp), as text, JSON (--json) or an HTML page
// (--html OUT).
#include <fmt/format.h>

#include "base/utf8.hpp"
#include "commands.hpp"
#include "diff_command.hpp"
#include "nanotrace/diff.hpp"
#include "nanotrace/diff_html.hpp"

namespace nanotrace::cli {
namespace {

std::vector<std::string> split_runs(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    std::string part = text.substr(at, comma == std::string::npos ? comma : comma - at);
    if (!part.empty()) out.push_back(std::move(part));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

std::string percent(double x) { return fmt::format("{:+.1f}%", x * 100); }

// "+23.1% [+18.0%, +29.0%] *": the interval of the report's verdict (between runs when it is
// attributable, else within runs); * significant, o observed only; "(untested)" when untested.
std::string metric_cell(const DiffMetric& m, bool attributable) {
  if (!m.tested) return fmt::format("{:+.1f}% (untested)", m.relative * 100);
  const DiffEstimate& e = attributable ? m.between : m.within;
  return fmt::format("{} [{}, {}]{}", percent(m.relative), percent(e.rel_lo), percent(e.rel_hi),
                     m.significant ? " *"
                     : m.observed  ? " o"
                                   : "");
}

// A subject of a ranking: its changed metrics (significant, or observed with `observed`) and
// the mean, with the interval of that verdict.
void print_ranked(const DiffSubject& s, bool tail, bool observed) {
  fmt::print("  {:<6} {}\n", s.kind, utf8::escape_text(s.name));
  for (const DiffMetric& m : s.metrics) {
    if (!(observed ? m.observed : m.significant) && m.name != "mean") continue;
    fmt::print("         {:<6} {:>9} -> {:>9}  {:>10}  {}\n", m.name, diff_duration(m.a, s.unit),
               diff_duration(m.b, s.unit), diff_duration(m.delta, s.unit, true),
               metric_cell(m, !observed));
  }
  fmt::print(
      "         adds {} per run{}\n", diff_duration(tail ? s.tail_added : s.added, s.unit, true),
      tail ? " in its slowest 1 %" : fmt::format(" ({} -> {} samples)", s.count_a, s.count_b));
}

void print_rankings(const DiffReport& r) {
  if (!r.ranked.empty()) {
    fmt::print("\nfindings, by the time they add per run (count x delta of the mean):\n");
    for (size_t i : r.ranked) print_ranked(r.subjects[i], false, false);
  }
  if (!r.tail_ranked.empty()) {
    fmt::print("\ntail findings (p99, p99.9), by the time their slowest 1 % adds:\n");
    for (size_t i : r.tail_ranked) print_ranked(r.subjects[i], true, false);
  }
  if (!r.observed_ranked.empty()) {
    fmt::print(
        "\n{}, by the time they add per run (within-run intervals):\n",
        r.attributable
            ? "beyond the runs' own noise but within the variation between runs: not findings"
            : "OBSERVED, NOT ATTRIBUTABLE: one run a side cannot tell a change from the "
              "variation between runs (give several runs a side: A1,A2,A3)");
    for (size_t i : r.observed_ranked) print_ranked(r.subjects[i], false, true);
  }
}

void print_text(const DiffReport& r) {
  fmt::print("A: {} ({} run{})\nB: {} ({} run{})\n",
             utf8::escape_text(fmt::to_string(fmt::join(r.a, ","))), r.a.size(),
             r.a.size() == 1 ? "" : "s", utf8::escape_text(fmt::to_string(fmt::join(r.b, ","))),
             r.b.size(), r.b.size() == 1 ? "" : "s");
  fmt::print("{}\n", utf8::escape_text(diff_headline(r)));
  print_rankings(r);
  if (!r.subjects.empty()) {
    fmt::print(
        "\nevery subject (relative change B vs A, {:g} % interval {}, * significant, o observed: "
        "beyond the runs' own noise, not attributable):\n",
        r.options.level * 100, r.attributable ? "between runs" : "within runs");
    for (const DiffSubject& s : r.subjects) {
      fmt::print("  {:<9} {} ({} -> {} samples)\n", s.kind, utf8::escape_text(s.name), s.count_a,
                 s.count_b);
      for (const DiffMetric& m : s.metrics) {
        fmt::print("      {:<6} {:>9} -> {:>9}  {}\n", m.name, diff_duration(m.a, s.unit),
                   diff_duration(m.b, s.unit), metric_cell(m, r.attributable));
      }
    }
  }
  if (!r.events.empty()) {
    fmt::print("\nevents (records per run, per second):\n");
    for (const DiffEvent& e : r.events) {
      fmt::print("  {:<36} {:>12.0f} -> {:<12.0f} {:>12.0f}/s -> {:.0f}/s\n",
                 utf8::escape_text(e.event), e.count_a, e.count_b, e.rate_a, e.rate_b);
    }
  }
  for (const std::string& n : r.notes) fmt::print("note: {}\n", utf8::escape_text(n));
  fmt::print(
      "\nstatistics: a side's value is the geometric mean over its runs of each run's; between "
      "runs: {}; within runs: block bootstrap ({} resamples); each test asks whether the change "
      "is at least {:g} % of A's value; Holm over {} quantile tests at family-wise level {:g}; "
      "the mean ranks but does not decide\n",
      r.attributable
          ? fmt::format("t-test over the runs ({:g} degrees of freedom)", r.degrees_of_freedom)
          : "not measurable with one run a side",
      r.options.resamples, r.options.min_change_percent, r.tests, r.options.alpha);
}

}  // namespace

std::unique_ptr<DiffArgs> register_diff_command(CLI::App& app) {
  auto args = std::make_unique<DiffArgs>();
  DiffArgs& d = *args;
  d.command = app.add_subcommand(
      "diff",
      "Which part got slower between two sets of runs (traces or benchmark results), how sure");
  d.command
      ->add_option("A", d.a,
                   "Trace files (or benchmark JSON files) of A, comma-separated: runs of one "
                   "build (with one run a side, changes are observed, not attributable)")
      ->required();
  d.command->add_option("B", d.b, "The same for B")->required();
  d.command->add_option("--pair", d.pairs,
                        "BEGIN,END,KEY pairs to compare (default: the known pairs that occur)");
  d.command->add_flag("--json", d.json, "Print JSON");
  d.command->add_option("--html", d.html, "Also write an HTML page to this file");
  d.command->add_option("--alpha", d.alpha, "Family-wise significance level")
      ->check(CLI::Range(1e-6, 0.5))
      ->capture_default_str();
  d.command
      ->add_option("--min-change", d.min_change,
                   "Least change a finding must be sure of, in percent of A's value (JSON: "
                   "statistics.min_change_percent)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  d.command->add_option("--resamples", d.resamples, "Bootstrap replicates")
      ->check(CLI::Range(100u, 1000000u))
      ->capture_default_str();
  d.command->add_option("--seed", d.seed, "Bootstrap seed")->capture_default_str();
  return args;
}

bool run_diff_command(const DiffArgs& args, int* status) {
  if (args.command == nullptr || !args.command->parsed()) return false;
  *status = 1;
  DiffOptions options;
  options.alpha = args.alpha;
  options.min_change_percent = args.min_change;
  options.resamples = args.resamples;
  options.seed = args.seed;
  for (const std::string& p : args.pairs) {
    auto rule = parse_pair_rule(p);
    if (!rule.ok()) return (*status = fail(rule.status())), true;
    options.pairs.push_back(*rule);
  }
  auto report = diff_runs(split_runs(args.a), split_runs(args.b), options);
  if (!report.ok()) return (*status = fail(report.status())), true;
  if (!args.html.empty()) {
    if (Status s = write_diff_html(*report, args.html); !s.ok()) return (*status = fail(s)), true;
  }
  if (args.json) {
    fmt::print("{}\n", diff_json(*report));
  } else {
    print_text(*report);
  }
  *status = 0;
  return true;
}

}  // namespace nanotrace::cli
