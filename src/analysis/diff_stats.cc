// The hierarchical block bootstrap of `nanotrace diff` (see diff_stats.hpp for the method and
// why): binning samples per block, drawing replicates from per-block cumulative histograms,
// the intervals and p-values, and Holm's correction.
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

// The regularized incomplete beta function I_x(a, b), by its continued fraction (modified
// Lentz), for Student's t distribution.
double incomplete_beta(double x, double a, double b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(1 - x, b, a);
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log(1 - x)) /
                       a;
  constexpr double kTiny = 1e-300;
  double f = 1, c = 1, d = 0;
  for (int i = 0; i <= 300; ++i) {
    const int m = i / 2;
    double num;
    if (i == 0) {
      num = 1;
    } else if (i % 2 == 0) {
      num = (m * (b - m) * x) / ((a + 2 * m - 1) * (a + 2 * m));
    } else {
      num = -((a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1));
    }
    d = 1 + num * d;
    d = std::fabs(d) < kTiny ? kTiny : d;
    d = 1 / d;
    c = 1 + num / c;
    c = std::fabs(c) < kTiny ? kTiny : c;
    const double cd = c * d;
    f *= cd;
    if (std::fabs(1 - cd) < 1e-12) break;
  }
  return front * (f - 1);
}

// Two-sided p of t with df degrees of freedom.
double student_two_sided_p(double t, double df) {
  return incomplete_beta(df / (df + t * t), df / 2, 0.5);
}

// The t with two-sided tail probability p (bisection: called once per comparison).
double student_quantile(double p, double df) {
  double lo = 0, hi = 1e3;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (student_two_sided_p(mid, df) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The x with erfc(x) = y (bisection).
double erfc_inverse(double y) {
  double lo = 0, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erfc(mid) > y ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Percentile of sorted values (linear between neighbours).
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto i = static_cast<size_t>(at);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (sorted[i + 1] - sorted[i]) * (at - static_cast<double>(i));
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
  runs_.push_back(std::move(run));
  pooled_.insert(pooled_.end(), values.begin(), values.end());
  count_ += n;
  stats_done_ = false;
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

double SampleSet::exact(int metric) const {
  const LatencyStats& s = stats();
  switch (metric) {
    case kMean:
      return s.mean_ns;
    case kP50:
      return static_cast<double>(s.p50_ns);
    case kP90:
      return static_cast<double>(s.p90_ns);
    case kP99:
      return static_cast<double>(s.p99_ns);
    default:
      return static_cast<double>(s.p999_ns);
  }
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
  std::vector<uint32_t> used;                             // blocks with a weight

  template <class Blocks>
  void add_block(const Blocks& bins, uint64_t n, long double s, uint32_t lo) {
    std::vector<uint32_t> c(width, 0);
    for (uint16_t b : bins) ++c[b - lo];
    for (uint32_t j = 1; j < width; ++j) c[j] += c[j - 1];
    cum.push_back(std::move(c));
    count.push_back(n);
    sum.push_back(s);
  }

  // Draws one replicate's weights: runs with replacement (when several), then blocks within
  // each drawn run with replacement.
  void draw(Rng& rng) {
    for (uint32_t k : used) weight[k] = 0;
    used.clear();
    const auto runs = static_cast<uint32_t>(run_blocks.size());
    for (uint32_t r = 0; r < runs; ++r) {
      const auto [first, blocks] = run_blocks[runs > 1 ? rng.below(runs) : r];
      for (uint32_t k = 0; k < blocks; ++k) {
        const uint32_t b = first + (blocks > 1 ? rng.below(blocks) : 0);
        if (weight[b]++ == 0) used.push_back(b);
      }
    }
  }
  void all_once() {
    used.clear();
    for (uint32_t b = 0; b < cum.size(); ++b) {
      weight[b] = 1;
      used.push_back(b);
    }
  }

  // The metrics of the current weights, quantiles as bin values.
  std::array<double, kMetrics> metrics(uint32_t lo) const {
    uint64_t n = 0;
    long double s = 0;
    for (uint32_t b : used) {
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
        for (uint32_t b : used) at += uint64_t{weight[b]} * cum[b][mid];
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
  return s;
}

std::string too_few(double q) {
  return fmt::format("fewer than {} samples above the p{} on a side", kTailSamples, q * 100);
}

}  // namespace

namespace {

// Each metric's exact values, and whether there are samples enough to test it; false if no
// metric can be.
bool exact_values(const SampleSet& a, const SampleSet& b, std::array<MetricResult, kMetrics>* out) {
  bool any = false;
  for (int m = 0; m < kMetrics; ++m) {
    MetricResult& r = (*out)[m];
    r.metric = m;
    r.decides = m != kMean;
    r.a = a.count() > 0 ? a.exact(m) : 0;
    r.b = b.count() > 0 ? b.exact(m) : 0;
    r.delta = r.b - r.a;
    r.relative = r.a > 0 ? r.delta / r.a : 0;
    const uint64_t fewest = std::min(a.count(), b.count());
    if (m == kMean) {
      r.tested = fewest >= 2;
      if (!r.tested) r.why = "fewer than 2 samples on a side";
    } else {
      const double q = metric_quantile(m);
      const uint64_t needed = m == kP50 ? kMedianSamples : kTailSamples;
      r.tested = static_cast<double>(fewest) * (1 - q) >= static_cast<double>(needed);
      if (!r.tested) r.why = too_few(q);
    }
    any = any || r.tested;
  }
  return any;
}

// The bootstrap's replicates of each metric's difference (b - a) and relative change, and
// the binned estimates of all the samples: replicates are read relative to them, so that
// intervals centre on the exact difference.
struct Replicates {
  std::array<double, kMetrics> base_a{}, base_b{};
  std::array<std::vector<double>, kMetrics> deltas, ratios;
};

Replicates bootstrap(const SampleSet& a, const SampleSet& b, const Options& options) {
  const uint32_t lo = std::min(a.lo_bin(), b.lo_bin());
  const uint32_t width = std::max(a.hi_bin(), b.hi_bin()) - lo + 1;
  Side sa = prepare(a.run_blocks(), lo, width), sb = prepare(b.run_blocks(), lo, width);
  Replicates out;
  sa.all_once();
  sb.all_once();
  out.base_a = sa.metrics(lo);
  out.base_b = sb.metrics(lo);
  Rng rng(options.seed);
  for (uint32_t i = 0; i < options.resamples; ++i) {
    sa.draw(rng);
    sb.draw(rng);
    const std::array<double, kMetrics> ra = sa.metrics(lo), rb = sb.metrics(lo);
    for (int m = 0; m < kMetrics; ++m) {
      out.deltas[m].push_back(rb[m] - ra[m]);
      out.ratios[m].push_back(ra[m] > 0 ? (rb[m] - ra[m]) / ra[m] : 0);
    }
  }
  return out;
}

// Few runs: a bootstrap of k runs sees (k - 1) / k of the variance between runs, and the
// spread of k runs is itself uncertain. So with several runs on both sides the standard error
// is scaled back up and tested against Student's t with (runs - 2) degrees of freedom, and the
// intervals are widened to match.
struct RunCorrection {
  bool by_runs = false;
  double df = 0;
  double se_scale = 1;
  double widen = 1;
};

RunCorrection run_correction(const SampleSet& a, const SampleSet& b, double level) {
  RunCorrection c;
  const uint32_t fewest_runs = std::min(a.runs(), b.runs());
  c.by_runs = fewest_runs >= 2;
  c.df = static_cast<double>(a.runs() + b.runs()) - 2;
  if (c.by_runs) {
    c.se_scale = std::sqrt(fewest_runs / (fewest_runs - 1.0));
    c.widen =
        student_quantile(1 - level, c.df) * c.se_scale / (std::sqrt(2.0) * erfc_inverse(1 - level));
  }
  return c;
}

// A tested metric's standard error, intervals and p-value from its replicates (sorted here).
void conclude(MetricResult& r, std::vector<double>& d, std::vector<double>& ratios, double base_a,
              double base_b, const RunCorrection& c, double level) {
  const double tail = (1 - level) / 2;
  double mean = 0, sq = 0;
  for (double x : d) mean += x;
  mean /= static_cast<double>(d.size());
  for (double x : d) sq += (x - mean) * (x - mean);
  r.se = d.size() > 1 ? c.se_scale * std::sqrt(sq / static_cast<double>(d.size() - 1)) : 0;
  std::sort(d.begin(), d.end());
  std::sort(ratios.begin(), ratios.end());
  const double shift = r.delta - (base_b - base_a);
  r.lo = r.delta - c.widen * (r.delta - (percentile(d, tail) + shift));
  r.hi = r.delta + c.widen * (percentile(d, 1 - tail) + shift - r.delta);
  const double base_rel = base_a > 0 ? (base_b - base_a) / base_a : 0;
  const double rel_shift = r.relative - base_rel;
  r.rel_lo = r.relative - c.widen * (r.relative - (percentile(ratios, tail) + rel_shift));
  r.rel_hi = r.relative + c.widen * (percentile(ratios, 1 - tail) + rel_shift - r.relative);
  double p_param;
  if (r.se > 0) {
    p_param =
        c.by_runs ? student_two_sided_p(r.delta / r.se, c.df) : normal_two_sided_p(r.delta / r.se);
  } else {
    p_param = r.delta == 0 ? 1 : 0;  // every replicate agrees: no sampling variation at all
  }
  // The percentile test: replicates (centred and widened as the interval) on the other side
  // of zero. A skewed or lumpy bootstrap distribution (a p90 where preemptions begin) can make
  // the normal p-value too small; taking the larger of the two keeps a significant change's
  // interval clear of zero.
  double across = 0;
  for (double x : d) {
    const double v = r.delta + c.widen * (x + shift - r.delta);
    across += (r.delta > 0 ? v < 0 : r.delta < 0 ? v > 0 : true) ? 1 : v == 0 ? 0.5 : 0;
  }
  const double p_percentile = std::min(1.0, (2 * across + 1) / (static_cast<double>(d.size()) + 1));
  r.p = std::max(p_param, p_percentile);
}

}  // namespace

std::array<MetricResult, kMetrics> compare(const SampleSet& a, const SampleSet& b,
                                           const Options& options) {
  std::array<MetricResult, kMetrics> out;
  if (!exact_values(a, b, &out)) return out;
  Replicates rep = bootstrap(a, b, options);
  const RunCorrection correction = run_correction(a, b, options.level);
  for (int m = 0; m < kMetrics; ++m) {
    if (!out[m].tested) continue;
    conclude(out[m], rep.deltas[m], rep.ratios[m], rep.base_a[m], rep.base_b[m], correction,
             options.level);
  }
  return out;
}

uint32_t apply_holm(const std::vector<MetricResult*>& tests, double alpha, double min_change) {
  std::vector<MetricResult*> tested;
  for (MetricResult* t : tests) {
    t->significant = false;
    if (t->tested && t->decides) tested.push_back(t);
  }
  std::stable_sort(tested.begin(), tested.end(),
                   [](const MetricResult* x, const MetricResult* y) { return x->p < y->p; });
  const size_t m = tested.size();
  for (size_t i = 0; i < m; ++i) {
    if (tested[i]->p > alpha / static_cast<double>(m - i)) break;
    tested[i]->significant = true;
  }
  for (MetricResult* t : tested) {
    const bool big = t->a > 0 ? std::fabs(t->relative) >= min_change : t->delta != 0;
    t->significant = t->significant && big;
  }
  return static_cast<uint32_t>(m);
}

}  // namespace nanotrace::diffstats
