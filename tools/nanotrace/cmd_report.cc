// `nanotrace report`: write the self-contained HTML report (see nanotrace/report.hpp).
#include <fmt/format.h>

#include "analysis_commands.hpp"
#include "commands.hpp"
#include "nanotrace/report.hpp"

namespace nanotrace::cli {

int cmd_report(const ReportArgs& args) {
  ReportOptions options;
  options.output = args.output;
  options.window_ns = static_cast<uint64_t>(args.window_ms * 1e6);
  for (const std::string& p : args.pairs) {
    auto rule = parse_pair_rule(p);
    if (!rule.ok()) return fail(rule.status());
    options.pairs.push_back(*rule);
  }
  auto opened = open_source(args.source);
  if (!opened.ok()) return fail(opened.status());
  auto summary = write_html_report(**opened, options);
  if (!summary.ok()) return fail(summary.status());
  fmt::print(stderr, "wrote {}: {} records, {} lost, {} latency pairs, busiest window {} records\n",
             args.output, summary->records, summary->lost, summary->pairs, summary->window_records);
  return 0;
}

}  // namespace nanotrace::cli
