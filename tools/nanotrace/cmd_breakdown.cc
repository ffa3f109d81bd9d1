// `nanotrace breakdown`: per-stage percentiles of iograph I/Os joined with their kernel
// events (nanotrace/breakdown.hpp), as a table or JSON.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "nanotrace/breakdown.hpp"

namespace nanotrace::cli {

int cmd_breakdown(const std::string& source, bool json) {
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  auto b = analyze_breakdown(**opened);
  if (!b.ok()) return fail(b.status());
  const IoBreakdown& r = *b;
  const double ordered_pct = r.joined ? 100.0 * double(r.ordered) / double(r.joined) : 0;
  if (json) {
    nlohmann::json stages = nlohmann::json::array();
    for (const BreakdownStage& s : r.stages) {
      stages.push_back({{"stage", s.name},
                        {"count", s.count},
                        {"p50_ns", s.p50_ns},
                        {"p90_ns", s.p90_ns},
                        {"p99_ns", s.p99_ns},
                        {"max_ns", s.max_ns},
                        {"mean_ns", s.mean_ns}});
    }
    nlohmann::json out = {{"ios", r.ios},           {"joined", r.joined},
                          {"ordered", r.ordered},   {"ordered_percent", ordered_pct},
                          {"no_uring", r.no_uring}, {"no_block", r.no_block},
                          {"stages", stages}};
    fmt::print("{}\n", dump_json(out));
    return 0;
  }
  fmt::print(
      "{} I/Os completed while the kernel was traced; {} joined with every kernel stage "
      "({} without io_uring events, {} without a block request); {:.3f} % of the joined "
      "in stage order\n\n",
      r.ios, r.joined, r.no_uring, r.no_block, ordered_pct);
  fmt::print("{:<40} {:>9} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "STAGE", "COUNT", "P50 us",
             "P90 us", "P99 us", "MAX us", "MEAN us");
  for (const BreakdownStage& s : r.stages) {
    fmt::print("{:<40} {:>9} {:>11.2f} {:>11.2f} {:>11.2f} {:>11.2f} {:>11.2f}\n", s.name, s.count,
               s.p50_ns / 1e3, s.p90_ns / 1e3, s.p99_ns / 1e3, s.max_ns / 1e3, s.mean_ns / 1e3);
  }
  return 0;
}

}  // namespace nanotrace::cli
