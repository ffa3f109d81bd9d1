// The statistics of `nanotrace diff`: how sure a change between two sets of samples is.
//
// Method: a hierarchical block bootstrap of the difference B - A of the mean and of the
// p50, p90, p99 and p99.9 (nearest rank, as `latency` computes them).
//   - Runs: a side of several runs (A1.ntr,A2.ntr) resamples its runs with replacement
//     first, so that the variance between runs (another file layout, another CPU state, a
//     noisy neighbour) is counted; two runs of one build would otherwise often differ
//     "significantly" by far more than the samples within one run vary.
//   - Blocks: within a run, samples are cut in arrival order into contiguous blocks, which
//     are resampled with replacement: latencies next to each other in time are correlated
//     (a slow phase of the machine, a busy device), and resampling single samples would
//     treat them as independent and give intervals too narrow.
//   - Quantiles are taken from histograms of log-spaced bins (128 per power of two: a bin
//     is at most 0.8 % wide) kept per block, so one replicate costs a few thousand
//     operations whatever the number of samples; intervals are shifted to be centred on the
//     exact difference (the binning's own error cancels out).
// A bootstrap rather than a rank test: a rank test answers "do the distributions differ",
// not "by how much did the p99 move", and its p-value assumes independent samples.
// Heavy tails: a quantile is tested only when each side holds at least kTailSamples samples
// above it (a bootstrap of the few largest values is known to be unreliable), else it is
// shown without an interval.
//
// The mean: shown with its interval, and the time a change adds (count x delta mean) ranks
// the findings, but it does not decide significance: a latency's tail may be so heavy that
// its variance is infinite (a Pareto tail of index below 2), and then no bootstrap interval
// of the mean is reliable (in the tests, same-build pairs were flagged by their means).
//
// Significance: a p-value per (subject, quantile) from the bootstrap's standard error (the
// difference over it, against the normal distribution: smooth enough for Holm's
// correction over many tests, where a percentile p-value would need far more replicates),
// Holm's step-down correction over every test of one diff (the family-wise level is the
// one asked for), and a minimal relative change (changes below it are not reported as
// findings however sure they are).
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

// Samples above a tail quantile (p90 and up) each side needs for it to be tested; the p50
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
};

// The difference B - A of one metric.
struct MetricResult {
  int metric = kMean;
  double a = 0, b = 0;  // exact values
  double delta = 0;     // b - a
  double relative = 0;  // delta / a (0 if a is 0)
  bool tested = false;  // false: too few samples (why says it)
  std::string why;
  double lo = 0, hi = 0;          // interval of delta
  double rel_lo = 0, rel_hi = 0;  // interval of relative
  double se = 0;                  // bootstrap standard error of delta
  double p = 1;                   // two-sided, before correction
  bool significant = false;       // set by apply_holm
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
  // Exact value of a metric over every run's samples pooled (nearest rank).
  double exact(int metric) const;
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
  };
  const std::vector<Run>& run_blocks() const { return runs_; }

 private:
  std::vector<Run> runs_;
  mutable std::vector<uint64_t> pooled_;  // for exact values (stats() reorders them)
  uint64_t count_ = 0;
  uint32_t lo_bin_ = UINT32_MAX, hi_bin_ = 0;
  mutable LatencyStats stats_;
  mutable bool stats_done_ = false;
};

// compare - the bootstrap of every metric between a and b.
std::array<MetricResult, kMetrics> compare(const SampleSet& a, const SampleSet& b,
                                           const Options& options);

// apply_holm - marks the tests of `tests` (tested ones that decide) significant by Holm's
// step-down procedure at family-wise level alpha, then keeps only those whose relative change is at
// least min_change. Returns how many tests the family held.
uint32_t apply_holm(const std::vector<MetricResult*>& tests, double alpha, double min_change);

// Bin of a value, and the value a bin stands for (its middle; exact below 128).
uint32_t bin_of(uint64_t value);
double bin_value(uint32_t bin);

}  // namespace nanotrace::diffstats
