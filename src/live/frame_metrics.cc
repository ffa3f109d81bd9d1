// A live frame's pair rules as OpenMetrics families, for the fleet agent's /metrics: per rule,
// the age of the oldest operation in flight (a Prometheus alert on it fires on a stuck
// operation, which writes no record), the operations in flight, the recent p99 and max. All
// gauges: a counter's family and sample names differ between OpenMetrics (what the agent
// serves) and the classic text format promtool checks.
#include <fmt/format.h>

#include <cmath>

#include "base/openmetrics.hpp"
#include "live/live_view.hpp"

namespace nanotrace::live {
namespace {

std::string number(double v) { return std::isnan(v) ? "NaN" : fmt::format("{}", v); }

}  // namespace

std::string frame_metric_families(const LiveFrame& frame, const std::string& labels) {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const LivePair&);
  };
  static const Family kFamilies[] = {
      {"nanotrace_pair_oldest_open_seconds", "gauge",
       "Age of the oldest operation of a pair rule still in flight (a begin with no end yet), "
       "over the node's traced processes; 0 when none is",
       [](const LivePair& p) { return static_cast<double>(p.oldest_open_ns) / 1e9; }},
      {"nanotrace_pair_open_operations", "gauge",
       "Operations of a pair rule in flight now, over the node's traced processes",
       [](const LivePair& p) { return static_cast<double>(p.open); }},
      {"nanotrace_pair_recent_p99_seconds", "gauge",
       "p99 latency of the pairs of a rule that ended in the last interval (within 1/64); NaN "
       "when none did",
       [](const LivePair& p) {
         return p.last.count == 0 ? std::nan("") : static_cast<double>(p.last.p99_ns) / 1e9;
       }},
      {"nanotrace_pair_recent_max_seconds", "gauge",
       "Longest pair of a rule that ended in the last interval; NaN when none did",
       [](const LivePair& p) {
         return p.last.count == 0 ? std::nan("") : static_cast<double>(p.last.max_ns) / 1e9;
       }},
  };
  std::string out;
  for (const Family& f : kFamilies) {
    out += fmt::format("# TYPE {} {}\n# HELP {} {}\n", f.name, f.type, f.name, f.help);
    for (const LivePair& p : frame.pairs) {
      out += fmt::format("{}{{{}{}begin=\"{}\",end=\"{}\",key=\"{}\"}} {}\n", f.name, labels,
                         labels.empty() ? "" : ",", openmetrics::label_value(p.rule.begin),
                         openmetrics::label_value(p.rule.end), openmetrics::label_value(p.rule.key),
                         number(f.value(p)));
    }
  }
  return out;
}

}  // namespace nanotrace::live
