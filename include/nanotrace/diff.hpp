// Comparing two runs (or two sets of runs) of one program: which part got slower, by how
// much, and how sure. What `nanotrace diff`, its HTML page and nanotrace.diff() show.
//
// Traces: per event, counts and rates; per begin/end pair (the pairs the analysis layer
// knows, or given ones), the latency distribution; per stage of an I/O when both sides hold
// kernel events (nanotrace/breakdown.hpp); per traced thread, on-CPU and off-CPU time when
// both sides hold the scheduler's events (--kernel sched). Benchmarks: result JSON files of Google
// Benchmark
// (`make bench`) or of `iograph bench --json`, per benchmark.
//
// Statistics (src/analysis/diff_stats.hpp): a hierarchical block bootstrap (runs, then
// blocks of consecutive samples) of the differences of the mean, p50, p90, p99 and p99.9,
// with Holm's correction over every quantile test of the diff, and a minimal relative change.
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
  std::vector<PairRule> pairs;  // empty: the known pairs that occur on both sides
  double alpha = 0.05;          // family-wise level of the findings
  double min_change = 0.05;     // smallest relative change reported as a finding
  double level = 0.95;          // of the intervals shown
  uint32_t resamples = 2000;    // bootstrap replicates
  uint64_t seed = 0x6e616e6f74726163;
};

// The difference B - A of one metric of a subject.
struct DiffMetric {
  std::string name;  // mean, p50, p90, p99, p99.9
  double a = 0, b = 0, delta = 0;
  double relative = 0;  // delta / a (0 when a is 0)
  bool tested = false;  // false: too few samples (why)
  std::string why;
  double lo = 0, hi = 0;          // interval of delta
  double rel_lo = 0, rel_hi = 0;  // interval of relative
  double p = 1;                   // before correction
  bool significant = false;       // after Holm's correction and the minimal change
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
  // Indexes into subjects: the significant ones by added time (largest first), and the ones
  // whose tail changed by tail_added.
  std::vector<size_t> ranked;
  std::vector<size_t> tail_ranked;
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
// nothing changed significantly.
std::string diff_headline(const DiffReport& report);
// A value of a subject's unit ("ns" or "ps") as a duration: "12.3us"; signed: "+1.2ms".
std::string diff_duration(double value, const std::string& unit, bool sign = false);

// The report as the JSON text `nanotrace diff --json` prints (and nanotrace.diff() parses).
std::string diff_json(const DiffReport& report);

}  // namespace nanotrace
