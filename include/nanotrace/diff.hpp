// Comparing two runs (or two sets of runs) of one program: which part got slower, by how
// much, and how sure. What `nanotrace diff`, its HTML page and nanotrace.diff() show.
//
// Traces: per event, counts and rates; per begin/end pair (the pairs the analysis layer
// knows, or given ones), the latency distribution; per stage of an I/O when both sides hold
// kernel events (nanotrace/breakdown.hpp); per traced thread, on-CPU and off-CPU time when
// both sides hold the scheduler's events (--kernel sched). Benchmarks: result JSON files of
// Google Benchmark (`make bench`) or of `iograph bench --json`, per benchmark.
//
// Statistics (src/analysis/diff_stats.hpp): a side's value of a metric (mean, p50, p90, p99,
// p99.9) is the geometric mean over its runs of each run's value. A change is a finding
// (significant) when it stands out of the variation between runs: a t-test over the runs, which
// needs several runs on a side. With one run a side that variation is unknown, and changes beyond
// the runs' own sampling noise (a block bootstrap within the runs) are shown as observed, not
// attributable. Holm's correction over every quantile test of the diff, and a minimal change.
//
// Thread safety: the functions open their own traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/analysis.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

struct DiffOptions {
  std::vector<PairRule> pairs;    // empty: the known pairs that occur on both sides
  double alpha = 0.05;            // family-wise level of the findings
  double min_change_percent = 5;  // smallest change reported, in percent of A's value
  double level = 0.95;            // of the intervals shown
  uint32_t resamples = 2000;      // bootstrap replicates
  uint64_t seed = 0x6e616e6f74726163;
};

// An interval of a change and its p-value (two-sided, before Holm's correction).
struct DiffEstimate {
  double lo = 0, hi = 0;          // of delta
  double rel_lo = 0, rel_hi = 0;  // of relative: delta's interval over A's value
  double p = 1;
};

// The difference B - A of one metric of a subject.
struct DiffMetric {
  std::string name;  // mean, p50, p90, p99, p99.9
  // Each side's geometric mean over its runs of the run's own value (nearest rank over the run).
  double a = 0, b = 0, delta = 0;
  double relative = 0;  // delta / a (0 when a is 0)
  bool tested = false;  // false: too few samples (why)
  std::string why;
  // Between runs, when the report is attributable: the change against the variation between
  // runs. significant: after Holm's correction and the minimal change.
  DiffEstimate between;
  bool significant = false;
  // Within runs: the change against the runs' own sampling noise (a block bootstrap). observed:
  // the runs compared differ, which says nothing of the builds with one run a side.
  DiffEstimate within;
  bool observed = false;
};

// One thing compared: a pair's latency, a stage of the I/Os, a thread's on-CPU slices or
// off-CPU gaps, a benchmark's time.
struct DiffSubject {
  std::string kind;  // "pair", "stage", "thread", "benchmark"
  // The rule's label, the stage's name, "THREAD on-CPU" / "THREAD off-CPU", the benchmark's.
  std::string name;
  std::string unit;                   // "ns"
  uint64_t count_a = 0, count_b = 0;  // samples, all runs
  uint32_t runs_a = 0, runs_b = 0;
  std::vector<DiffMetric> metrics;  // mean, p50, p90, p99, p99.9
  LatencyStats a, b;                // of the pooled samples (histograms for the page)
  // Time the change adds per run: (count_b / runs_b) x delta of the mean; for a thread, whose
  // slices change in number as well as length, B's total per run less A's. And the tail's:
  // the slowest 1 % of (count_b / runs_b) samples x delta of the p99.
  double added = 0;
  double tail_added = 0;
  bool significant = false;       // some quantile changed
  bool tail_significant = false;  // the p99 or p99.9 changed
  bool observed = false;          // some quantile differs beyond the runs' own noise
};

// An event's count and rate on both sides (per run, averaged over the runs).
struct DiffEvent {
  std::string event;
  double count_a = 0, count_b = 0;
  double rate_a = 0, rate_b = 0;  // records per second over the run's span
};

struct DiffReport {
  std::string mode;  // "traces" or "benchmarks"
  std::vector<std::string> a, b;
  DiffOptions options;
  std::vector<DiffEvent> events;
  std::vector<DiffSubject> subjects;  // in the order compared
  // Whether a change can be told from the variation between runs: a side holds two runs or
  // more (runs_a + runs_b >= 3). False: nothing is significant, changes are only observed.
  bool attributable = false;
  double degrees_of_freedom = 0;  // of the t-tests between runs: runs_a + runs_b - 2
  // Indexes into subjects: the significant ones by added time (largest first), and the ones
  // whose tail changed by tail_added; the observed ones that are not significant (beyond
  // their runs' own noise, not beyond the variation between runs or with one run a side),
  // by added time.
  std::vector<size_t> ranked;
  std::vector<size_t> tail_ranked;
  std::vector<size_t> observed_ranked;
  uint32_t tests = 0;              // quantile tests in the family
  std::vector<std::string> notes;  // what was not compared, and why
};

// diff_runs - compares the runs of side a with those of side b: trace files (or live
// segments), or benchmark result JSON files; one kind for all.
// Errors: kInvalidArgument (no runs on a side, sources of both kinds), as Trace::open,
// kNotFound (nothing to compare), kCorrupt (a JSON file that is not a benchmark result).
Result<DiffReport> diff_runs(const std::vector<std::string>& a, const std::vector<std::string>& b,
                             const DiffOptions& options);

// One line: the first finding (what, by how much, the interval, the time it adds), or that
// nothing changed significantly; when the report is not attributable, that it is not, and
// the first change observed.
std::string diff_headline(const DiffReport& report);
// A value of a subject's unit ("ns" or "ps") as a duration: "12.3us"; signed: "+1.2ms".
std::string diff_duration(double value, const std::string& unit, bool sign = false);

// The report as the JSON text `nanotrace diff --json` prints (and nanotrace.diff() parses).
std::string diff_json(const DiffReport& report);

}  // namespace nanotrace
