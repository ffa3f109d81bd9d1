// The words of a diff shared by its outputs: durations, and the one-line headline.
#include <fmt/format.h>

#include <cmath>

#include "nanotrace/diff.hpp"

namespace nanotrace {

std::string diff_duration(double value, const std::string& unit, bool sign) {
  const double ns = unit == "ps" ? value / 1e3 : value;
  const double a = std::fabs(ns);
  const char* s = sign ? (ns < 0 ? "-" : "+") : (ns < 0 ? "-" : "");
  if (a < 1e3) return fmt::format("{}{:.{}f}ns", s, a, a < 10 && unit == "ps" ? 2 : 0);
  if (a < 1e6) return fmt::format("{}{:.1f}us", s, a / 1e3);
  if (a < 1e9) return fmt::format("{}{:.1f}ms", s, a / 1e6);
  return fmt::format("{}{:.2f}s", s, a / 1e9);
}

std::string diff_headline(const DiffReport& r) {
  if (r.ranked.empty()) {
    return fmt::format(
        "no significant change: {} subjects, {} tests at family-wise level {:g} (Holm), changes "
        "below {:g} % not reported",
        r.subjects.size(), r.tests, r.options.alpha, r.options.min_change * 100);
  }
  const DiffSubject& s = r.subjects[r.ranked.front()];
  // Its most significant quantile.
  const DiffMetric* best = nullptr;
  for (const DiffMetric& m : s.metrics) {
    if (m.significant && (best == nullptr || m.p < best->p)) best = &m;
  }
  return fmt::format(
      "{} {}: {} {:+.1f} % ({} -> {}; {:g} % interval {:+.1f} % to {:+.1f} %), adds {} per run"
      "{}",
      s.kind, s.name, best->name, best->relative * 100, diff_duration(best->a, s.unit),
      diff_duration(best->b, s.unit), r.options.level * 100, best->rel_lo * 100, best->rel_hi * 100,
      diff_duration(s.added, s.unit, true),
      r.ranked.size() > 1
          ? fmt::format("; {} more finding{}", r.ranked.size() - 1, r.ranked.size() > 2 ? "s" : "")
          : "");
}

}  // namespace nanotrace
