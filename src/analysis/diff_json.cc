// The JSON document of a diff: what `nanotrace diff --json` prints and nanotrace.diff()
// returns. Keys are documented in docs/diff.md.
#include <nlohmann/json.hpp>

#include "base/utf8.hpp"
#include "nanotrace/diff.hpp"

namespace nanotrace {
namespace {

using Json = nlohmann::json;

Json histogram(const LatencyStats& s) {
  Json h = Json::array();
  for (const HistogramBucket& b : s.histogram) {
    h.push_back({{"lo", b.lo_ns}, {"hi", b.hi_ns}, {"count", b.count}});
  }
  return h;
}

Json subject(const DiffSubject& s, bool attributable) {
  Json metrics = Json::array();
  for (const DiffMetric& m : s.metrics) {
    Json j = {{"metric", m.name},
              {"a", m.a},
              {"b", m.b},
              {"delta", m.delta},
              {"relative", m.relative},
              {"tested", m.tested},
              {"significant", m.significant},
              {"observed", m.observed}};
    if (m.tested) {
      if (attributable) {
        j["interval"] = {m.between.lo, m.between.hi};
        j["relative_interval"] = {m.between.rel_lo, m.between.rel_hi};
        j["p"] = m.between.p;
      }
      j["within_run"] = {{"interval", {m.within.lo, m.within.hi}},
                         {"relative_interval", {m.within.rel_lo, m.within.rel_hi}},
                         {"p", m.within.p}};
    } else {
      j["why"] = m.why;
    }
    metrics.push_back(std::move(j));
  }
  return {{"kind", s.kind},
          {"name", utf8::valid(s.name)},
          {"unit", s.unit},
          {"count_a", s.count_a},
          {"count_b", s.count_b},
          {"runs_a", s.runs_a},
          {"runs_b", s.runs_b},
          {"added", s.added},
          {"tail_added", s.tail_added},
          {"significant", s.significant},
          {"tail_significant", s.tail_significant},
          {"observed", s.observed},
          {"metrics", std::move(metrics)},
          {"histogram_a", histogram(s.a)},
          {"histogram_b", histogram(s.b)}};
}

Json names(const std::vector<std::string>& v) {
  Json j = Json::array();
  for (const std::string& s : v) j.push_back(utf8::valid(s));
  return j;
}

}  // namespace

std::string diff_json(const DiffReport& r) {
  Json events = Json::array();
  for (const DiffEvent& e : r.events) {
    events.push_back({{"event", utf8::valid(e.event)},
                      {"count_a", e.count_a},
                      {"count_b", e.count_b},
                      {"rate_a", e.rate_a},
                      {"rate_b", e.rate_b}});
  }
  Json subjects = Json::array();
  for (const DiffSubject& s : r.subjects) subjects.push_back(subject(s, r.attributable));
  Json doc = {{"mode", r.mode},
              {"a", names(r.a)},
              {"b", names(r.b)},
              {"statistics",
               {{"method",
                 "per metric, each side's geometric mean over its runs of the run's value; "
                 "between runs: t-test over the runs' log values (pooled variance); within "
                 "runs: block bootstrap; tests of the excess over min_change_percent; Holm "
                 "over the quantile tests"},
                {"attributable", r.attributable},
                {"runs_a", r.a.size()},
                {"runs_b", r.b.size()},
                {"degrees_of_freedom", r.degrees_of_freedom},
                {"alpha", r.options.alpha},
                {"min_change_percent", r.options.min_change_percent},
                {"level", r.options.level},
                {"resamples", r.options.resamples},
                {"seed", r.options.seed},
                {"tests", r.tests}}},
              {"headline", diff_headline(r)},
              {"events", std::move(events)},
              {"subjects", std::move(subjects)},
              {"ranked", r.ranked},
              {"tail_ranked", r.tail_ranked},
              {"observed_ranked", r.observed_ranked},
              {"notes", names(r.notes)}};
  return doc.dump(1);
}

}  // namespace nanotrace
