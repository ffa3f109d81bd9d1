// The statistics of `nanotrace diff`: how sure a change between two sets of runs is, and
// whether it can be told from the variation between runs at all.
//
// The model: a random-effects one, on the log scale. Each run of a build has its own value of
// a metric (its mean, p50, p90, p99, p99.9 by nearest rank, as `latency` computes them) that
// differs from run to run (another CPU state, file layout, a neighbour's load: on a shared
// machine the largest term), by a factor rather than by an amount (a load that preempts the
// runs for longer stretches them all), and is measured within the run with a sampling error.
// A side's value is the geometric mean over its runs of each run's value (one run: its
// value); the change is B - A of those, tested as log(B / A).
//
// Two verdicts per metric, each with its interval and p-value:
//   - Between runs ("significant", the finding): a two-sample t-test on the runs' values. The
//     variance between runs is pooled over both sides (under "same build" the runs of both
//     sides come from one distribution) with k_A + k_B - 2 degrees of freedom, so that a
//     spread estimated from three runs is not taken for a known one; a side's variance is
//     never taken below what its within-run sampling error alone gives, nor below the bins'
//     resolution. Runs are the units, not samples: a run whose load made its p99 jump counts
//     once, however many samples it holds; taking the quantile of all runs' samples pooled
//     instead lets two loaded runs of three set a side's p99, which no resampling of runs
//     then sees vary. This needs at least one side with two runs (k_A + k_B >= 3).
//   - Within runs ("observed"): a block bootstrap of each run's samples. Samples are cut in
//     arrival order into contiguous blocks resampled with replacement (neighbouring latencies
//     are correlated: a slow phase, a busy device). It says whether the runs compared differ
//     by more than their own samples vary, and nothing about the builds: with one run a side
//     it is all there is, and such a change is shown as observed, not attributable.
// Quantiles in the bootstrap come from histograms of log-spaced bins (128 per power of two:
// a bin is at most 0.8 % wide) kept per block, so a replicate costs a few thousand operations
// whatever the number of samples. No interval is narrower than the bins of A's and B's values
// (half of each on either side): the data cannot resolve less.
// A rank test would answer "do the distributions differ", not "by how much did the p99 move",
// and its p-value assumes independent samples.
// Heavy tails: a quantile is tested only when every run holds at least kTailSamples samples
// above it (the few largest values of a run are unreliable), else it is shown untested.
//
// The mean: shown with its intervals, and the time a change adds (count x delta mean) ranks
// the findings, but it does not decide: a latency's tail may be so heavy that its variance is
// infinite, and then no interval of the mean is reliable.
//
// Significance: what is tested is not "the change is not zero" but "the change is beyond the
// least change asked for" (--min-change, of A's value): the p-value is that of the change's
// excess over it, so a finding is a change sure to be at least that large, and a change of
// 5.2 % measured to +-1.5 % is no 5 % finding. Holm's step-down correction over every
// deciding test of one diff (the family-wise level is the one asked for), separately for the
// two verdicts.
//
// Determinism: a fixed seed (splitmix64/xoshiro256**), so one input gives one output.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nanotrace/analysis.hpp"

namespace nanotrace::diffstats {

// Samples above a tail quantile (p90 and up) each run needs for it to be tested; the p50
// needs kMedianSamples on either side of it (a benchmark's 10 repetitions compare medians).
constexpr uint64_t kTailSamples = 10;
constexpr uint64_t kMedianSamples = 5;
// Blocks a run is cut into (a run of fewer samples: one sample per block).
constexpr uint32_t kBlocksPerRun = 16;

enum Metric : int { kMean = 0, kP50, kP90, kP99, kP999, kMetrics };
const char* metric_name(int metric);  // "mean", "p50", ...
double metric_quantile(int metric);   // 0.5, 0.9, ... (0 for the mean)

struct Options {
  uint32_t resamples = 2000;
  uint64_t seed = 0x6e616e6f74726163;  // "nanotrac"
  double level = 0.95;                 // of the intervals shown
  double min_change = 0.05;            // the least change a finding is sure of, of A's value
};

// An interval of the change, its p-value (two-sided, before correction) and its verdict.
struct Verdict {
  double lo = 0, hi = 0;          // of delta
  double rel_lo = 0, rel_hi = 0;  // of relative: the interval of delta over A's value
  double se = 0;                  // standard error of delta
  double p = 1;                   // that the change is no larger than the least change (Options)
  bool passed = false;            // set by apply_holm: significant (between) or observed (within)
};

// The difference B - A of one metric.
struct MetricResult {
  int metric = kMean;
  double a = 0, b = 0;  // each side's geometric mean over its runs of the runs' exact values
  double delta = 0;     // b - a
  double relative = 0;  // delta / a (0 if a is 0)
  bool tested = false;  // false: too few samples (why says it)
  std::string why;
  Verdict within;             // the block bootstrap inside the runs
  bool attributable = false;  // the variance between runs is known: `between` holds
  Verdict between;            // the t-test over the runs
  double df = 0;              // of between: k_A + k_B - 2
  // In the family of tests (apply_holm): the quantiles; the mean only where the samples
  // cannot have a heavy tail (a benchmark's repetitions or per-file medians).
  bool decides = true;
};

// One side: runs of samples, binned by block.
class SampleSet {
 public:
  // Adds one run's samples, in arrival order (ns, or any non-negative integer unit).
  void add_run(std::span<const uint64_t> values);
  uint32_t runs() const { return static_cast<uint32_t>(runs_.size()); }
  uint64_t count() const { return count_; }
  // The side's value of a metric: the geometric mean over its runs of each run's exact value
  // (of 1 + value, less 1: defined at 0), and its log(1 + value), the scale of the tests.
  double value(int metric) const;
  double log_value(int metric) const;
  // The analysis layer's statistics of the pooled samples (percentiles, log2 histogram).
  const LatencyStats& stats() const;
  // Bin range [lo, hi] the samples occupy (empty set: lo > hi).
  uint32_t lo_bin() const { return lo_bin_; }
  uint32_t hi_bin() const { return hi_bin_; }

  // The binned samples, per run and block (for compare()).
  struct Block {
    uint64_t count = 0;
    long double sum = 0;
    std::vector<uint16_t> bins;  // per sample, in arrival order
  };
  struct Run {
    std::vector<Block> blocks;
    uint64_t count = 0;
    std::array<double, kMetrics> exact{};  // nearest rank over the run's samples
  };
  const std::vector<Run>& run_blocks() const { return runs_; }

 private:
  std::vector<Run> runs_;
  mutable std::vector<uint64_t> pooled_;  // for stats() (which reorders them)
  uint64_t count_ = 0;
  uint32_t lo_bin_ = UINT32_MAX, hi_bin_ = 0;
  mutable LatencyStats stats_;
  mutable bool stats_done_ = false;
};

// compare - both verdicts of every metric between a and b.
std::array<MetricResult, kMetrics> compare(const SampleSet& a, const SampleSet& b,
                                           const Options& options);

// apply_holm - over the tests of `tests` that are tested and decide: marks `within.passed`
// (observed) and, where attributable, `between.passed` (significant) by Holm's step-down
// procedure at family-wise level alpha, each verdict a family of its own. Returns how many
// tests the family held.
uint32_t apply_holm(const std::vector<MetricResult*>& tests, double alpha);

// Bin of a value, the value a bin stands for (its middle; exact below 128) and its width.
uint32_t bin_of(uint64_t value);
double bin_value(uint32_t bin);
double bin_width(uint32_t bin);

// Student's t distribution: two-sided tail probability of t with df degrees of freedom, and
// the t whose two-sided tail probability is p.
double student_two_sided_p(double t, double df);
double student_quantile(double p, double df);

}  // namespace nanotrace::diffstats
