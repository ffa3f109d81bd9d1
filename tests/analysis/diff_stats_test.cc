// The statistics of `nanotrace diff` on samples whose truth is known: heavy-tailed latencies
// (log-normal body, Pareto tail) drifting within a run, shifted between runs, and runs that
// met a loaded machine (a share of the samples preempted for milliseconds) or not. Same-build
// pairs must rarely be called significant, a shift between runs with no real change never
// with one run a side, planted changes must be found with the right size, a tail-only change
// must move the p99 and not the p50, and no interval may be narrower than the bins resolve.
// Every generator is seeded: the outcomes are fixed.
#include "analysis/diff_stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace nanotrace::diffstats {
namespace {

struct Workload {
  double median_ns = 100000;
  double sigma = 0.4;         // log-normal body
  double tail_share = 0.01;   // of samples from the Pareto tail
  double run_sigma = 0.0;     // log of a run's factor: variance between runs
  double drift_sigma = 0.05;  // log of the slow drift within a run (AR(1))
  double add_ns = 0;          // added to every sample
  double tail_add_share = 0;  // of samples that get tail_add_ns more
  double tail_add_ns = 0;
  // A loaded machine: each sample is preempted with this chance, for an exponential time of
  // this mean, and the body runs this much slower.
  double preempt_share = 0.03;
  double preempt_ns = 1500000;
  double loaded_factor = 1.03;
};

std::vector<uint64_t> run_of(const Workload& w, size_t n, std::mt19937_64& rng, bool loaded = false,
                             double factor = 1) {
  std::uniform_real_distribution<double> u(1e-12, 1.0);
  auto normal = [&] { return std::sqrt(-2 * std::log(u(rng))) * std::cos(2 * M_PI * u(rng)); };
  const double run_factor =
      factor * std::exp(w.run_sigma * normal()) * (loaded ? w.loaded_factor : 1.0);
  double drift = 0;
  std::vector<uint64_t> v;
  for (size_t i = 0; i < n; ++i) {
    drift = 0.95 * drift + std::sqrt(1 - 0.95 * 0.95) * normal();
    double x = w.median_ns * std::exp(w.sigma * normal() + w.drift_sigma * drift) * run_factor;
    if (u(rng) < w.tail_share) x *= std::pow(u(rng), -1.0 / 1.5);  // Pareto, alpha 1.5
    x += w.add_ns;
    if (u(rng) < w.tail_add_share) x += w.tail_add_ns;
    if (loaded && u(rng) < w.preempt_share) x += -w.preempt_ns * std::log(u(rng));
    v.push_back(static_cast<uint64_t>(x));
  }
  return v;
}

// A side of runs; loads[i]: whether run i met a loaded machine.
SampleSet side(const Workload& w, const std::vector<bool>& loads, size_t n, std::mt19937_64& rng) {
  SampleSet s;
  for (bool loaded : loads) {
    const std::vector<uint64_t> v = run_of(w, n, rng, loaded);
    s.add_run(v);
  }
  return s;
}

SampleSet quiet_side(const Workload& w, int runs, size_t n, std::mt19937_64& rng) {
  return side(w, std::vector<bool>(runs, false), n, rng);
}

std::array<MetricResult, kMetrics> judged(const SampleSet& a, const SampleSet& b,
                                          double min_change = 0.05, uint32_t resamples = 2000) {
  Options options;
  options.min_change = min_change;
  options.resamples = resamples;
  auto results = compare(a, b, options);
  std::vector<MetricResult*> tests;
  for (MetricResult& r : results) tests.push_back(&r);
  apply_holm(tests, 0.05);
  return results;
}

bool any_significant(const std::array<MetricResult, kMetrics>& results, int pair) {
  bool any = false;
  for (const MetricResult& r : results) {
    any = any || r.between.passed;
    if (r.between.passed) {
      std::printf("pair %d: %s %.0f -> %.0f (%+.1f%%, p %.2g)\n", pair, metric_name(r.metric), r.a,
                  r.b, r.relative * 100, r.between.p);
    }
  }
  return any;
}

// Loads of one pair's runs, each loaded with chance `share`. With several runs a side, drawn
// again when load and side coincide entirely (every run of one side loaded, none of the
// other's): that is a change of the machine coinciding with the change of build, which no
// statistic can tell from a slower build. With one run a side they are kept: nothing may be
// attributed there.
std::pair<std::vector<bool>, std::vector<bool>> loads(int runs, double share,
                                                      std::mt19937_64& rng) {
  std::bernoulli_distribution loaded(share);
  for (;;) {
    std::vector<bool> la(runs), lb(runs);
    int in_a = 0, in_b = 0;
    for (int r = 0; r < runs; ++r) {
      in_a += (la[r] = loaded(rng)) ? 1 : 0;
      in_b += (lb[r] = loaded(rng)) ? 1 : 0;
    }
    const bool coincide = (in_a == runs && in_b == 0) || (in_a == 0 && in_b == runs);
    if (runs == 1 || share == 0 || !coincide) return {la, lb};
  }
}

// How many of `pairs` same-workload pairs show a significant metric; each run is loaded with
// chance `load_share`.
int false_positives(const Workload& w, int runs, size_t n, int pairs, uint64_t seed,
                    double load_share = 0) {
  std::mt19937_64 rng(seed);
  int flagged = 0, observed = 0;
  for (int i = 0; i < pairs; ++i) {
    const auto [la, lb] = loads(runs, load_share, rng);
    const SampleSet a = side(w, la, n, rng), b = side(w, lb, n, rng);
    // 500 replicates: the verdict counted is the one between runs, which takes from the
    // bootstrap only its variance (a floor); the within-run p-values, floored at 2 / 501, still
    // pass Holm's thresholds of a few tests.
    const auto results = judged(a, b, 0.02, 500);
    flagged += any_significant(results, i) ? 1 : 0;
    bool any_observed = false;
    for (const MetricResult& r : results) any_observed = any_observed || r.within.passed;
    observed += any_observed ? 1 : 0;
  }
  std::printf("%d run(s) a side: %d of %d same-workload pairs flagged, %d observed\n", runs,
              flagged, pairs, observed);
  return flagged;
}

TEST(DiffStats, BinsAreNarrowAndOrdered) {
  uint32_t last = 0;
  for (uint64_t x = 1; x < (uint64_t{1} << 40); x = x * 1.01 + 1) {
    const uint32_t b = bin_of(x);
    EXPECT_GE(b, last);
    last = b;
    EXPECT_LE(std::fabs(bin_value(b) - static_cast<double>(x)), 0.008 * static_cast<double>(x) + 1)
        << x;
    EXPECT_LE(std::fabs(bin_value(b) - static_cast<double>(x)), bin_width(b) / 2) << x;
  }
  EXPECT_EQ(bin_of(5), 5u);
  EXPECT_EQ(bin_value(5), 5.0);
  EXPECT_EQ(bin_width(bin_of(5)), 1.0);
  EXPECT_EQ(bin_width(bin_of(100000)), 512.0);  // [2^16, 2^17) in 128 bins
}

TEST(DiffStats, StudentsTMatchesItsTables) {
  EXPECT_NEAR(student_quantile(0.05, 1), 12.706, 0.001);
  EXPECT_NEAR(student_quantile(0.05, 4), 2.776, 0.001);
  EXPECT_NEAR(student_quantile(0.01, 10), 3.169, 0.001);
  EXPECT_NEAR(student_two_sided_p(2.776, 4), 0.05, 0.0005);
  EXPECT_NEAR(student_two_sided_p(0, 3), 1.0, 1e-9);
}

TEST(DiffStats, OneRunASideIsNeverAttributed) {
  // Same-workload pairs, one run a side: the within-run verdict may see the runs differ, but
  // nothing is significant (the variation between runs is unknown).
  Workload w;
  w.run_sigma = 0.04;
  EXPECT_EQ(false_positives(w, 1, 2000, 20, 1, 0.5), 0);
}

TEST(DiffStats, PlantedShiftBetweenRunsIsObservedNotAttributed) {
  // One run a side, B's run 20 % slower throughout (its machine, not its build): far beyond
  // the run's own noise, so observed, and not a finding.
  std::mt19937_64 rng(7);
  Workload w;
  SampleSet a, b;
  a.add_run(run_of(w, 3000, rng));
  b.add_run(run_of(w, 3000, rng, false, 1.2));
  const auto results = judged(a, b);
  EXPECT_TRUE(results[kP50].within.passed) << results[kP50].within.p;
  EXPECT_NEAR(results[kP50].relative, 0.2, 0.05);
  for (const MetricResult& r : results) {
    EXPECT_FALSE(r.attributable);
    EXPECT_FALSE(r.between.passed) << metric_name(r.metric);
  }
}

TEST(DiffStats, ShiftsBetweenRunsWithSeveralRunsAreNotFindings) {
  // Three runs a side, one of B's 40 % slower, the others as A's: the change of B's mean over
  // its runs (+13 %) is far beyond the runs' own noise, and within the variation they show.
  std::mt19937_64 rng(8);
  Workload w;
  w.tail_share = 0;
  SampleSet a, b;
  for (int r = 0; r < 3; ++r) a.add_run(run_of(w, 1500, rng));
  for (double f : {1.0, 1.4, 1.0}) b.add_run(run_of(w, 1500, rng, false, f));
  const auto results = judged(a, b);
  EXPECT_TRUE(results[kP50].within.passed)
      << results[kP50].relative << " p " << results[kP50].within.p;
  for (const MetricResult& r : results) {
    if (!r.tested) continue;
    EXPECT_TRUE(r.attributable);
    EXPECT_EQ(r.df, 4);
    EXPECT_FALSE(r.between.passed) << metric_name(r.metric) << " p " << r.between.p;
  }
}

TEST(DiffStats, LoadThatMetMoreRunsOfOneSideIsNotAFinding) {
  // The case that made pooled quantiles fail: three of A's four runs met a loaded machine and
  // one of B's. Pooled, A's p99 is set by its loaded runs and B's by its one; per run, the
  // loaded runs' p99s stand apart from the quiet ones', and that spread is the variation
  // between runs.
  std::mt19937_64 rng(9);
  Workload w;
  w.tail_share = 0;
  const SampleSet a = side(w, {true, false, true, true}, 1500, rng);
  const SampleSet b = side(w, {false, true, false, false}, 1500, rng);
  const auto results = judged(a, b);
  EXPECT_TRUE(results[kP99].within.passed);  // the runs differ...
  EXPECT_LT(results[kP99].relative, -0.5);
  EXPECT_FALSE(any_significant(results, 0));  // ...the builds are not shown to
}

TEST(DiffStats, SameBuildPairsWithLoadChangingBetweenRunsAreRarelySignificant) {
  // Each run loaded with chance 1/2: with three runs a side, and with spread between runs.
  Workload w;
  w.run_sigma = 0.03;
  EXPECT_LE(false_positives(w, 3, 1200, 20, 2, 0.5), 1);
  EXPECT_LE(false_positives(w, 4, 1000, 20, 3, 0.5), 1);
}

TEST(DiffStats, SameBuildPairsWithVarianceBetweenRunsAreRarelySignificant) {
  Workload w;
  w.run_sigma = 0.04;
  EXPECT_LE(false_positives(w, 3, 1500, 20, 4), 1);
  EXPECT_LE(false_positives(w, 2, 1500, 20, 5), 1);
}

TEST(DiffStats, PlantedShiftIsFoundWithItsSizeUnderChangingLoad) {
  // Four runs a side, half of them loaded: a shift of 50 % of the median.
  std::mt19937_64 rng(10);
  Workload w;
  const SampleSet a = side(w, {true, false, false, true}, 1000, rng);
  w.add_ns = 50000;
  const SampleSet b = side(w, {false, true, true, false}, 1000, rng);
  const auto results = judged(a, b);
  EXPECT_FALSE(results[kMean].between.passed);  // the mean does not decide
  EXPECT_TRUE(results[kP50].between.passed) << results[kP50].between.p;
  EXPECT_NEAR(results[kP50].delta, 50000, 5000);
  EXPECT_LE(results[kP50].between.lo, results[kP50].delta);
  EXPECT_GE(results[kP50].between.hi, results[kP50].delta);
  EXPECT_GT(results[kP50].between.lo, 0);
}

TEST(DiffStats, TailOnlyChangeMovesTheP99NotTheP50) {
  // Three runs a side: 2 % of B's samples 2 ms slower.
  std::mt19937_64 rng(11);
  Workload w;
  w.tail_share = 0;
  w.sigma = 0.2;
  const SampleSet a = quiet_side(w, 3, 2000, rng);
  w.tail_add_share = 0.02;
  w.tail_add_ns = 2000000;
  const SampleSet b = quiet_side(w, 3, 2000, rng);
  const auto results = judged(a, b);
  EXPECT_TRUE(results[kP99].between.passed);
  EXPECT_GT(results[kP99].delta, 1500000);
  EXPECT_FALSE(results[kP50].between.passed) << results[kP50].relative;
  EXPECT_LT(std::fabs(results[kP50].relative), 0.05);
}

TEST(DiffStats, NoIntervalIsNarrowerThanTheBins) {
  // Every sample of A 100,000 and of B 149,994 in each of three runs: no spread at all, yet the
  // bins (512 and 1,024 wide there) are all the data resolves.
  SampleSet a, b;
  for (int r = 0; r < 3; ++r) {
    a.add_run(std::vector<uint64_t>(2000, 100000));
    b.add_run(std::vector<uint64_t>(2000, 149994));
  }
  const auto results = judged(a, b);
  const MetricResult& p50 = results[kP50];
  EXPECT_NEAR(p50.delta, 49994, 1e-6);
  for (const Verdict* v : {&p50.between, &p50.within}) {
    EXPECT_LE(v->lo, p50.delta - 768);
    EXPECT_GE(v->hi, p50.delta + 768);
    EXPECT_GT(v->lo, 0);
    EXPECT_TRUE(v->passed);
  }
}

TEST(DiffStats, TailsWithTooFewSamplesInARunAreNotTested) {
  std::mt19937_64 rng(12);
  Workload w;
  SampleSet a = quiet_side(w, 1, 500, rng), b = quiet_side(w, 1, 500, rng);
  auto results = compare(a, b, Options{});
  EXPECT_TRUE(results[kMean].tested);
  EXPECT_TRUE(results[kP90].tested);
  EXPECT_FALSE(results[kP99].tested);
  EXPECT_FALSE(results[kP999].tested);
  EXPECT_NE(results[kP999].why, "");
  // 1,500 samples a side, but in runs of 500: the p99 of a run is not resolved.
  a = quiet_side(w, 3, 500, rng);
  b = quiet_side(w, 3, 500, rng);
  results = compare(a, b, Options{});
  EXPECT_FALSE(results[kP99].tested);
}

TEST(DiffStats, OneSeedGivesOneResult) {
  std::mt19937_64 rng(6);
  Workload w;
  SampleSet a = quiet_side(w, 2, 1000, rng), b = quiet_side(w, 2, 1000, rng);
  auto x = compare(a, b, Options{}), y = compare(a, b, Options{});
  for (int m = 0; m < kMetrics; ++m) {
    EXPECT_EQ(x[m].within.lo, y[m].within.lo);
    EXPECT_EQ(x[m].within.hi, y[m].within.hi);
    EXPECT_EQ(x[m].within.p, y[m].within.p);
    EXPECT_EQ(x[m].between.p, y[m].between.p);
  }
}

}  // namespace
}  // namespace nanotrace::diffstats
