// The two verdicts of `nanotrace diff` (see diff_stats.hpp for the model and why): binning
// samples per block, each run's exact values, the block bootstrap within runs drawn from
// per-block cumulative histograms, the t-test between runs, and Holm's correction.
#include "analysis/diff_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "nanotrace/analysis.hpp"

namespace nanotrace::diffstats {
namespace {

constexpr int kSubBits = 7;  // 128 bins per power of two
constexpr uint32_t kSub = 1u << kSubBits;

// xoshiro256** seeded by splitmix64: fast, and the same sequence on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& w : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n) (multiply-shift: the bias is below 2^-32 for the n used here).
  uint32_t below(uint32_t n) {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

double normal_two_sided_p(double z) { return std::erfc(std::fabs(z) / std::sqrt(2.0)); }

// Percentile of sorted values (linear between neighbours).
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto i = static_cast<size_t>(at);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (sorted[i + 1] - sorted[i]) * (at - static_cast<double>(i));
}

// The log scale of the tests: log(1 + value), defined at 0.
double to_log(double value) { return std::log1p(std::max(0.0, value)); }
double from_log(double log) { return std::expm1(log); }

double variance(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return sq / static_cast<double>(v.size() - 1);
}

}  // namespace

const char* metric_name(int metric) {
  static const char* const kNames[kMetrics] = {"mean", "p50", "p90", "p99", "p99.9"};
  return kNames[metric];
}

double metric_quantile(int metric) {
  static const double kQ[kMetrics] = {0, 0.5, 0.9, 0.99, 0.999};
  return kQ[metric];
}

uint32_t bin_of(uint64_t x) {
  if (x < kSub) return static_cast<uint32_t>(x);
  const int top = 63 - __builtin_clzll(x);  // >= kSubBits
  return static_cast<uint32_t>((top - kSubBits + 1) << kSubBits) |
         static_cast<uint32_t>((x >> (top - kSubBits)) & (kSub - 1));
}

double bin_value(uint32_t bin) {
  if (bin < kSub) return bin;
  const int top = static_cast<int>(bin >> kSubBits) + kSubBits - 1;
  const double lo = std::ldexp(static_cast<double>(kSub | (bin & (kSub - 1))), top - kSubBits);
  return lo + std::ldexp(0.5, top - kSubBits);
}

double bin_width(uint32_t bin) {
  if (bin < kSub) return 1;
  return std::ldexp(1.0, static_cast<int>(bin >> kSubBits) - 1);
}

void SampleSet::add_run(std::span<const uint64_t> values) {
  Run run;
  const size_t n = values.size();
  const size_t blocks = std::min<size_t>(n, kBlocksPerRun);
  run.blocks.resize(blocks);
  for (size_t k = 0; k < blocks; ++k) {
    Block& b = run.blocks[k];
    const size_t from = n * k / blocks, to = n * (k + 1) / blocks;
    b.bins.reserve(to - from);
    for (size_t i = from; i < to; ++i) {
      const uint32_t bin = bin_of(values[i]);
      b.bins.push_back(static_cast<uint16_t>(bin));
      b.sum += values[i];
      lo_bin_ = std::min(lo_bin_, bin);
      hi_bin_ = std::max(hi_bin_, bin);
    }
    b.count = to - from;
  }
  run.count = n;
  const size_t offset = pooled_.size();
  pooled_.insert(pooled_.end(), values.begin(), values.end());
  LatencyStats s;
  if (n > 0) {
    // The run's own values, as the analysis layer computes them. It reorders the run's part
    // of the pooled values, whose order the blocks hold.
    s = compute_latency_stats(std::span<uint64_t>(pooled_.data() + offset, n));
    run.exact = {s.mean_ns, static_cast<double>(s.p50_ns), static_cast<double>(s.p90_ns),
                 static_cast<double>(s.p99_ns), static_cast<double>(s.p999_ns)};
  }
  // One run: its statistics are the pooled ones (no second pass over its samples).
  stats_done_ = runs_.empty();
  if (stats_done_) stats_ = std::move(s);
  runs_.push_back(std::move(run));
  count_ += n;
}

const LatencyStats& SampleSet::stats() const {
  if (!stats_done_) {
    // The analysis layer's own percentiles (it reorders the values: their order is no
    // longer needed, the blocks hold it).
    stats_ = compute_latency_stats(std::span<uint64_t>(pooled_.data(), pooled_.size()));
    stats_done_ = true;
  }
  return stats_;
}

double SampleSet::log_value(int metric) const {
  // Runs without samples have no value (a thread that never slept in one run): such a subject
  // is shown, and not tested.
  double sum = 0, runs = 0;
  for (const Run& r : runs_) {
    if (r.count == 0) continue;
    sum += to_log(r.exact[metric]);
    ++runs;
  }
  return runs > 0 ? sum / runs : 0;
}

double SampleSet::value(int metric) const {
  // One run: its value exactly (the logarithm's rounding would show in the last digits).
  if (runs_.size() == 1) return runs_.front().exact[metric];
  return from_log(log_value(metric));
}

namespace {

// One side prepared for drawing replicates: per block, cumulative counts over the common bins.
struct Side {
  uint32_t width = 0;
  std::vector<std::vector<uint32_t>> cum;  // per block (all runs): count at bins <= j
  std::vector<uint64_t> count;             // per block
  std::vector<long double> sum;            // per block
  std::vector<std::pair<uint32_t, uint32_t>> run_blocks;  // per run: first block, blocks
  std::vector<uint32_t> weight;                           // per block, of one replicate
  std::vector<std::vector<uint32_t>> used;                // per run: blocks with a weight

  void add_block(const std::vector<uint16_t>& bins, uint64_t n, long double s, uint32_t lo) {
    std::vector<uint32_t> c(width, 0);
    for (uint16_t b : bins) ++c[b - lo];
    for (uint32_t j = 1; j < width; ++j) c[j] += c[j - 1];
    cum.push_back(std::move(c));
    count.push_back(n);
    sum.push_back(s);
  }

  // One replicate's weights: each run's blocks drawn with replacement within the run.
  void draw(Rng& rng) {
    for (uint32_t r = 0; r < run_blocks.size(); ++r) {
      for (uint32_t k : used[r]) weight[k] = 0;
      used[r].clear();
      const auto [first, blocks] = run_blocks[r];
      for (uint32_t k = 0; k < blocks; ++k) {
        const uint32_t b = first + (blocks > 1 ? rng.below(blocks) : 0);
        if (weight[b]++ == 0) used[r].push_back(b);
      }
    }
  }
  void all_once() {
    for (uint32_t r = 0; r < run_blocks.size(); ++r) {
      used[r].clear();
      for (uint32_t k = 0; k < run_blocks[r].second; ++k) {
        weight[run_blocks[r].first + k] = 1;
        used[r].push_back(run_blocks[r].first + k);
      }
    }
  }

  // The metrics of one run under the current weights, quantiles as bin values.
  std::array<double, kMetrics> run_metrics(uint32_t run, uint32_t lo) const {
    const std::vector<uint32_t>& blocks = used[run];
    uint64_t n = 0;
    long double s = 0;
    for (uint32_t b : blocks) {
      n += uint64_t{weight[b]} * count[b];
      s += weight[b] * sum[b];
    }
    std::array<double, kMetrics> out{};
    if (n == 0) return out;
    out[kMean] = static_cast<double>(s / n);
    for (int m = kP50; m < kMetrics; ++m) {
      auto rank = static_cast<uint64_t>(std::ceil(metric_quantile(m) * static_cast<double>(n)));
      rank = std::clamp<uint64_t>(rank, 1, n);
      // The smallest bin with at least `rank` samples at or below it.
      uint32_t a = 0, z = width - 1;
      while (a < z) {
        const uint32_t mid = (a + z) / 2;
        uint64_t at = 0;
        for (uint32_t b : blocks) at += uint64_t{weight[b]} * cum[b][mid];
        if (at >= rank) {
          z = mid;
        } else {
          a = mid + 1;
        }
      }
      out[m] = bin_value(lo + a);
    }
    return out;
  }

  // The side's value of each metric on the log scale: the mean over its runs.
  std::array<double, kMetrics> log_metrics(uint32_t lo) const {
    std::array<double, kMetrics> out{};
    const auto runs = static_cast<double>(run_blocks.size());
    for (uint32_t r = 0; r < run_blocks.size(); ++r) {
      const std::array<double, kMetrics> one = run_metrics(r, lo);
      for (int m = 0; m < kMetrics; ++m) out[m] += to_log(one[m]) / runs;
    }
    return out;
  }
};

// A side's blocks as cumulative histograms over the bins [lo, lo + width).
Side prepare(const std::vector<SampleSet::Run>& runs, uint32_t lo, uint32_t width) {
  Side s;
  s.width = width;
  for (const SampleSet::Run& run : runs) {
    s.run_blocks.emplace_back(static_cast<uint32_t>(s.cum.size()),
                              static_cast<uint32_t>(run.blocks.size()));
    for (const SampleSet::Block& b : run.blocks) s.add_block(b.bins, b.count, b.sum, lo);
  }
  s.weight.assign(s.cum.size(), 0);
  s.used.resize(runs.size());
  return s;
}

// Each metric's values, and whether every run holds samples enough to test it; false if no
// metric can be.
bool exact_values(const SampleSet& a, const SampleSet& b, std::array<MetricResult, kMetrics>* out) {
  uint64_t fewest_in_run = UINT64_MAX;
  for (const SampleSet* side : {&a, &b}) {
    for (const SampleSet::Run& r : side->run_blocks())
      fewest_in_run = std::min(fewest_in_run, r.count);
  }
  bool any = false;
  for (int m = 0; m < kMetrics; ++m) {
    MetricResult& r = (*out)[m];
    r.metric = m;
    r.decides = m != kMean;
    r.a = a.value(m);
    r.b = b.value(m);
    r.delta = r.b - r.a;
    r.relative = r.a > 0 ? r.delta / r.a : 0;
    if (m == kMean) {
      r.tested = fewest_in_run >= 1 && std::min(a.count(), b.count()) >= 2;
      if (!r.tested) r.why = "fewer than 2 samples on a side, or a run without samples";
    } else {
      const double q = metric_quantile(m);
      const uint64_t needed = m == kP50 ? kMedianSamples : kTailSamples;
      r.tested = static_cast<double>(fewest_in_run) * (1 - q) >= static_cast<double>(needed);
      if (!r.tested) {
        r.why = fmt::format("fewer than {} samples above the p{} in a run", needed, q * 100);
      }
    }
    any = any || r.tested;
  }
  return any;
}

// The bootstrap within runs: per replicate and metric, how far each side's value moved from
// its value over all blocks once, on the log scale (the binning's own error cancels out of
// these offsets).
struct Replicates {
  std::array<std::vector<double>, kMetrics> a, b;
};

Replicates bootstrap(const SampleSet& a, const SampleSet& b, const Options& options) {
  const uint32_t lo = std::min(a.lo_bin(), b.lo_bin());
  const uint32_t width = std::max(a.hi_bin(), b.hi_bin()) - lo + 1;
  Side sa = prepare(a.run_blocks(), lo, width), sb = prepare(b.run_blocks(), lo, width);
  sa.all_once();
  sb.all_once();
  const std::array<double, kMetrics> base_a = sa.log_metrics(lo), base_b = sb.log_metrics(lo);
  Replicates out;
  Rng rng(options.seed);
  for (uint32_t i = 0; i < options.resamples; ++i) {
    sa.draw(rng);
    sb.draw(rng);
    const std::array<double, kMetrics> ra = sa.log_metrics(lo), rb = sb.log_metrics(lo);
    for (int m = 0; m < kMetrics; ++m) {
      out.a[m].push_back(ra[m] - base_a[m]);
      out.b[m].push_back(rb[m] - base_b[m]);
    }
  }
  return out;
}

// The change on the log scale, and what the data can resolve of it: the bins of A's and B's
// values, each a uniform spread of its width.
struct LogChange {
  double log_a = 0, log_b = 0;
  double change = 0;  // log_b - log_a
  double least = 0;   // the least change a finding is sure of, on the side of `change`
  double half = 0;    // the least half-width of an interval
  double var_a = 0;   // the least variance of each side's value
  double var_b = 0;
};

LogChange log_change(const MetricResult& r, const SampleSet& a, const SampleSet& b,
                     double min_change) {
  LogChange c;
  c.log_a = a.log_value(r.metric);
  c.log_b = b.log_value(r.metric);
  c.change = c.log_b - c.log_a;
  // +5 % and -5 % of A's value; no decrease reaches 100 %.
  c.least = c.change >= 0    ? std::log1p(min_change)
            : min_change < 1 ? -std::log1p(-min_change)
                             : HUGE_VAL;
  auto log_width = [](double v) {
    const double w = bin_width(bin_of(static_cast<uint64_t>(std::llround(std::max(0.0, v)))));
    return std::log1p(w / (std::max(0.0, v) + 1));
  };
  const double wa = log_width(r.a), wb = log_width(r.b);
  c.half = (wa + wb) / 2;
  c.var_a = wa * wa / 12;
  c.var_b = wb * wb / 12;
  return c;
}

// An interval [lo, hi] of the log change, as intervals of delta and of relative.
void set_interval(const MetricResult& r, const LogChange& c, double lo, double hi, Verdict& v) {
  const double scale = from_log(c.log_a) + 1;
  v.lo = scale * std::expm1(lo);
  v.hi = scale * std::expm1(hi);
  v.rel_lo = r.a > 0 ? v.lo / r.a : 0;
  v.rel_hi = r.a > 0 ? v.hi / r.a : 0;
}

// The verdict within runs from the replicates' offsets: the percentile interval of the change,
// and the larger of the normal and the percentile p-value of its excess over the least change
// (a lumpy bootstrap distribution, a p90 where preemptions begin, can make the first too
// small). A change within the least change has p 1.
void conclude_within(MetricResult& r, const std::vector<double>& oa, const std::vector<double>& ob,
                     const LogChange& c, double level) {
  Verdict& v = r.within;
  const double se = std::sqrt(std::max(variance(oa), c.var_a) + std::max(variance(ob), c.var_b));
  const double sign = c.change < 0 ? -1 : 1;
  std::vector<double> d(oa.size());
  double across = 0;  // replicates not beyond the least change on the side of the change
  for (size_t i = 0; i < oa.size(); ++i) {
    d[i] = c.change + ob[i] - oa[i];
    across += sign * d[i] < c.least ? 1 : sign * d[i] == c.least ? 0.5 : 0;
  }
  std::sort(d.begin(), d.end());
  const double tail = (1 - level) / 2;
  set_interval(r, c, std::min(percentile(d, tail), c.change - c.half),
               std::max(percentile(d, 1 - tail), c.change + c.half), v);
  v.se = se;
  const double excess = std::fabs(c.change) - c.least;
  if (!(excess > 0)) {
    v.p = 1;
    return;
  }
  const double p_percentile = std::min(1.0, (2 * across + 1) / (static_cast<double>(d.size()) + 1));
  v.p = std::max(normal_two_sided_p(excess / se), p_percentile);
}

// The verdict between runs: the t-test of the change's excess over the least change, on the
// runs' values on the log scale, the variance between runs pooled over both sides, each
// side's share never below its within-run sampling error nor the bins' resolution.
void conclude_between(MetricResult& r, const SampleSet& a, const SampleSet& b, double within_a,
                      double within_b, const LogChange& c, double level) {
  const uint32_t ka = a.runs(), kb = b.runs();
  r.df = static_cast<double>(ka + kb) - 2;
  r.attributable = r.df >= 1;
  if (!r.attributable) return;
  double squares = 0;
  for (const auto* side : {&a, &b}) {
    const double mean = side->log_value(r.metric);
    for (const SampleSet::Run& run : side->run_blocks()) {
      const double x = to_log(run.exact[r.metric]) - mean;
      squares += x * x;
    }
  }
  const double between = squares / r.df;  // the variance of one run's value
  const double var_a = std::max({between / ka, within_a, c.var_a});
  const double var_b = std::max({between / kb, within_b, c.var_b});
  Verdict& v = r.between;
  v.se = std::sqrt(var_a + var_b);
  const double excess = std::fabs(c.change) - c.least;
  v.p = excess > 0 ? student_two_sided_p(excess / v.se, r.df) : 1;
  const double half = std::max(student_quantile(1 - level, r.df) * v.se, c.half);
  set_interval(r, c, c.change - half, c.change + half, v);
}

}  // namespace

std::array<MetricResult, kMetrics> compare(const SampleSet& a, const SampleSet& b,
                                           const Options& options) {
  std::array<MetricResult, kMetrics> out;
  if (!exact_values(a, b, &out)) return out;
  const Replicates rep = bootstrap(a, b, options);
  for (int m = 0; m < kMetrics; ++m) {
    MetricResult& r = out[m];
    if (!r.tested) continue;
    const LogChange c = log_change(r, a, b, options.min_change);
    conclude_within(r, rep.a[m], rep.b[m], c, options.level);
    conclude_between(r, a, b, variance(rep.a[m]), variance(rep.b[m]), c, options.level);
  }
  return out;
}

namespace {

// Holm's step-down procedure over (p, verdict) pairs: marks the verdicts that pass.
void holm(std::vector<std::pair<double, Verdict*>> tests, double alpha) {
  std::stable_sort(tests.begin(), tests.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  const size_t m = tests.size();
  for (size_t i = 0; i < m; ++i) {
    if (tests[i].first > alpha / static_cast<double>(m - i)) break;
    tests[i].second->passed = true;
  }
}

}  // namespace

uint32_t apply_holm(const std::vector<MetricResult*>& tests, double alpha) {
  std::vector<std::pair<double, Verdict*>> within, between;
  for (MetricResult* t : tests) {
    t->within.passed = t->between.passed = false;
    if (!t->tested || !t->decides) continue;
    within.emplace_back(t->within.p, &t->within);
    if (t->attributable) between.emplace_back(t->between.p, &t->between);
  }
  holm(within, alpha);
  holm(between, alpha);
  return static_cast<uint32_t>(within.size());
}

}  // namespace nanotrace::diffstats
