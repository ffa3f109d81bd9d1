// Student's t distribution for the tests of `nanotrace diff` (diff_stats.hpp): its two-sided
// tail probability through the regularized incomplete beta function, and its quantile.
#include <cmath>

#include "analysis/diff_stats.hpp"

namespace nanotrace::diffstats {
namespace {

// The regularized incomplete beta function I_x(a, b), by its continued fraction (modified
// Lentz).
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

}  // namespace

double student_two_sided_p(double t, double df) {
  if (!std::isfinite(t)) return 0;
  return incomplete_beta(df / (df + t * t), df / 2, 0.5);
}

double student_quantile(double p, double df) {
  // Bisection (called a few times per diff), up to 1e7: the t of df = 1 at the levels
  // Holm's correction reaches is in the thousands.
  double lo = 0, hi = 1e7;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (student_two_sided_p(mid, df) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace nanotrace::diffstats
