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

namespace {

// A subject's change by its most certain metric of one verdict: "p50 +23.1 % (80.0us ->
// 98.5us; 95 % interval +18.0 % to +29.0 %), adds +1.2ms per run".
std::string change(const DiffReport& r, const DiffSubject& s, bool within) {
  const DiffMetric* best = nullptr;
  for (const DiffMetric& m : s.metrics) {
    if (!(within ? m.observed : m.significant)) continue;
    if (best == nullptr || (within ? m.within.p < best->within.p : m.between.p < best->between.p)) {
      best = &m;
    }
  }
  if (best == nullptr) return "";
  const DiffEstimate& e = within ? best->within : best->between;
  return fmt::format(
      "{} {}: {} {:+.1f} % ({} -> {}; {}{:g} % interval {:+.1f} % to {:+.1f} %), "
      "adds {} per run",
      s.kind, s.name, best->name, best->relative * 100, diff_duration(best->a, s.unit),
      diff_duration(best->b, s.unit), within ? "within-run " : "", r.options.level * 100,
      e.rel_lo * 100, e.rel_hi * 100, diff_duration(s.added, s.unit, true));
}

std::string more(size_t n, const char* what) {
  return n > 1 ? fmt::format("; {} more {}", n - 1, what) : "";
}

}  // namespace

std::string diff_headline(const DiffReport& r) {
  const std::string family = fmt::format(
      "{} subjects, {} tests at family-wise level {:g} (Holm) of a change of at least {:g} %",
      r.subjects.size(), r.tests, r.options.alpha, r.options.min_change_percent);
  if (!r.ranked.empty()) {
    return change(r, r.subjects[r.ranked.front()], false) +
           more(r.ranked.size(), r.ranked.size() > 2 ? "findings" : "finding");
  }
  if (!r.attributable) {
    if (r.observed_ranked.empty()) {
      return fmt::format(
          "no significant change: nothing differs beyond the runs' own noise ({}); one run a "
          "side cannot measure the variation between runs",
          family);
    }
    return fmt::format(
        "not attributable: one run a side cannot tell a change from the variation between "
        "runs; observed {}{}",
        change(r, r.subjects[r.observed_ranked.front()], true),
        more(r.observed_ranked.size(), "observed"));
  }
  if (r.observed_ranked.empty()) return "no significant change: " + family;
  return fmt::format(
      "no significant change: {}; {} subject{} differ{} beyond the runs' own noise but within "
      "the variation between runs",
      family, r.observed_ranked.size(), r.observed_ranked.size() == 1 ? "" : "s",
      r.observed_ranked.size() == 1 ? "s" : "");
}

}  // namespace nanotrace
