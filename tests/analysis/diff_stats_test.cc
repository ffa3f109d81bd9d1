// The statistics of `nanotrace diff` on samples whose truth is known: heavy-tailed latencies
// (log-normal body, Pareto tail) drifting within a run and shifted between runs. Same-build
// pairs must rarely be called significant, planted shifts must be found with the right size,
// a tail-only change must move the p99 and not the p50. Every generator is seeded: the
// outcomes are fixed.
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
};

// One run of n samples, in arrival order.
std::vector<uint64_t> run_of(const Workload& w, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(1e-12, 1.0);
  auto normal = [&] { return std::sqrt(-2 * std::log(u(rng))) * std::cos(2 * M_PI * u(rng)); };
  const double run_factor = std::exp(w.run_sigma * normal());
  double drift = 0;
  std::vector<uint64_t> v;
  for (size_t i = 0; i < n; ++i) {
    drift = 0.95 * drift + std::sqrt(1 - 0.95 * 0.95) * normal();
    double x = w.median_ns * std::exp(w.sigma * normal() + w.drift_sigma * drift) * run_factor;
    if (u(rng) < w.tail_share) x *= std::pow(u(rng), -1.0 / 1.5);  // Pareto, alpha 1.5
    x += w.add_ns;
    if (u(rng) < w.tail_add_share) x += w.tail_add_ns;
    v.push_back(static_cast<uint64_t>(x));
  }
  return v;
}

SampleSet side(const Workload& w, int runs, size_t n, std::mt19937_64& rng) {
  SampleSet s;
  for (int r = 0; r < runs; ++r) {
    const std::vector<uint64_t> v = run_of(w, n, rng);
    s.add_run(v);
  }
  return s;
}

// How many of `pairs` same-workload pairs show any significant metric.
int false_positives(const Workload& w, int runs, size_t n, int pairs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int flagged = 0;
  for (int i = 0; i < pairs; ++i) {
    SampleSet a = side(w, runs, n, rng), b = side(w, runs, n, rng);
    auto results = compare(a, b, Options{});
    std::vector<MetricResult*> tests;
    for (MetricResult& r : results) tests.push_back(&r);
    apply_holm(tests, 0.05, 0.02);
    bool any = false;
    for (const MetricResult& r : results) {
      any = any || r.significant;
      if (r.significant) {
        std::printf("pair %d: %s %.0f -> %.0f (%+.1f%%, p %.2g)\n", i, metric_name(r.metric), r.a,
                    r.b, r.relative * 100, r.p);
      }
    }
    flagged += any ? 1 : 0;
  }
  std::printf("%d run(s) a side: %d of %d same-workload pairs flagged\n", runs, flagged, pairs);
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
  }
  EXPECT_EQ(bin_of(5), 5u);
  EXPECT_EQ(bin_value(5), 5.0);
}

TEST(DiffStats, SameBuildPairsOneRunEachAreRarelySignificant) {
  Workload w;
  const int flagged = false_positives(w, 1, 4000, 20, 1);
  EXPECT_LE(flagged, 1) << flagged << " of 20 same-workload pairs flagged";
}

TEST(DiffStats, SameBuildPairsWithVarianceBetweenRunsNeedSeveralRuns) {
  // Runs differ by a factor of exp(N(0, 0.04)): with three runs per side the runs are
  // resampled and the pairs stay quiet.
  Workload w;
  w.run_sigma = 0.04;
  const int flagged = false_positives(w, 3, 1500, 20, 2);
  EXPECT_LE(flagged, 1) << flagged << " of 20 same-workload pairs flagged";
}

TEST(DiffStats, PlantedShiftIsFoundWithItsSize) {
  std::mt19937_64 rng(3);
  Workload w;
  SampleSet a = side(w, 1, 3000, rng);
  w.add_ns = 300000;
  SampleSet b = side(w, 1, 3000, rng);
  auto results = compare(a, b, Options{});
  std::vector<MetricResult*> tests;
  for (MetricResult& r : results) tests.push_back(&r);
  apply_holm(tests, 0.05, 0.02);
  EXPECT_FALSE(results[kMean].significant);  // the mean does not decide
  EXPECT_TRUE(results[kP50].significant);
  EXPECT_NEAR(results[kMean].delta, 300000, 30000);
  EXPECT_NEAR(results[kP50].delta, 300000, 30000);
  EXPECT_LE(results[kP50].lo, results[kP50].delta);
  EXPECT_GE(results[kP50].hi, results[kP50].delta);
  EXPECT_GT(results[kP50].lo, 0);
}

TEST(DiffStats, TailOnlyChangeMovesTheP99NotTheP50) {
  std::mt19937_64 rng(4);
  Workload w;
  w.tail_share = 0;
  w.sigma = 0.2;
  SampleSet a = side(w, 1, 5000, rng);
  w.tail_add_share = 0.015;
  w.tail_add_ns = 3000000;
  SampleSet b = side(w, 1, 5000, rng);
  auto results = compare(a, b, Options{});
  std::vector<MetricResult*> tests;
  for (MetricResult& r : results) tests.push_back(&r);
  apply_holm(tests, 0.05, 0.02);
  EXPECT_TRUE(results[kP99].significant);
  EXPECT_GT(results[kP99].delta, 2000000);
  EXPECT_FALSE(results[kP50].significant) << results[kP50].relative << " p " << results[kP50].p;
  EXPECT_LT(std::fabs(results[kP50].relative), 0.05);
}

TEST(DiffStats, TailsWithTooFewSamplesAreNotTested) {
  std::mt19937_64 rng(5);
  Workload w;
  SampleSet a = side(w, 1, 500, rng), b = side(w, 1, 500, rng);
  auto results = compare(a, b, Options{});
  EXPECT_TRUE(results[kMean].tested);
  EXPECT_TRUE(results[kP90].tested);
  EXPECT_FALSE(results[kP99].tested);
  EXPECT_FALSE(results[kP999].tested);
  EXPECT_NE(results[kP999].why, "");
}

TEST(DiffStats, OneSeedGivesOneResult) {
  std::mt19937_64 rng(6);
  Workload w;
  SampleSet a = side(w, 2, 1000, rng), b = side(w, 2, 1000, rng);
  auto x = compare(a, b, Options{}), y = compare(a, b, Options{});
  for (int m = 0; m < kMetrics; ++m) {
    EXPECT_EQ(x[m].lo, y[m].lo);
    EXPECT_EQ(x[m].hi, y[m].hi);
    EXPECT_EQ(x[m].p, y[m].p);
  }
}

}  // namespace
}  // namespace nanotrace::diffstats
