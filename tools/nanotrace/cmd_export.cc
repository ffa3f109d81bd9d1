// `nanotrace export`: convert a trace to another tool's format (see nanotrace/export.hpp),
// then print one summary line on stderr.
#include <fmt/format.h>

#include "analysis_commands.hpp"
#include "commands.hpp"
#include "nanotrace/export.hpp"

namespace nanotrace::cli {

int cmd_export(const ExportArgs& args) {
  auto format = parse_export_format(args.format);
  if (!format.ok()) return fail(format.status());
  ExportOptions options;
  options.format = *format;
  options.output = args.output;
  for (const std::string& s : args.slices) {
    auto rule = parse_pair_rule(s);
    if (!rule.ok()) return fail(rule.status());
    options.slices.push_back(*rule);
  }
  if (!options.slices.empty() && *format != ExportFormat::kChrome &&
      *format != ExportFormat::kPerfetto) {
    return fail(Status::Invalid("--slice applies to the chrome and perfetto formats only"));
  }
  auto opened = open_source(args.source);
  if (!opened.ok()) return fail(opened.status());
  auto summary = export_trace(**opened, options);
  if (!summary.ok()) return fail(summary.status());
  std::string corrupt = summary->corrupt_blocks == 0
                            ? ""
                            : fmt::format(", {} corrupt blocks skipped", summary->corrupt_blocks);
  fmt::print(stderr, "exported {} records of {} threads ({} lost{}) as {} to {} ({} bytes)\n",
             summary->records, summary->threads, summary->lost, corrupt,
             export_format_name(*format), args.output == "-" ? "stdout" : args.output,
             summary->bytes_written);
  return 0;
}

}  // namespace nanotrace::cli
