// Registration and dispatch of `nanotrace export`, `latency` and `report`.
#include "analysis_commands.hpp"

namespace nanotrace::cli {

std::unique_ptr<AnalysisCommands> register_analysis_commands(CLI::App& app) {
  auto c = std::make_unique<AnalysisCommands>();
  const char* kSource = "pid, name:NAME or segment path";

  ExportArgs& e = c->export_args;
  c->export_cmd = app.add_subcommand(
      "export", "Convert a trace to CTF, Chrome JSON, Perfetto, CSV or JSON lines (streamed)");
  c->export_cmd->add_option("SOURCE", e.source, kSource)->required();
  c->export_cmd->add_option("-f,--format", e.format, "ctf, chrome, perfetto, csv or jsonl")
      ->required();
  c->export_cmd
      ->add_option("-o,--output", e.output,
                   "Output directory (ctf) or file ('-' = stdout for the others)")
      ->required();
  c->export_cmd->add_option("--slice", e.slices,
                            "BEGIN,END,KEY: draw pairs as slices (chrome, perfetto), e.g. "
                            "io:submit,io:complete,req");

  LatencyArgs& l = c->latency_args;
  c->latency_cmd =
      app.add_subcommand("latency", "Latency of begin/end pairs: percentiles and histogram");
  c->latency_cmd->add_option("SOURCE", l.source, kSource)->required();
  c->latency_cmd
      ->add_option("--begin", l.begin,
                   "Begin event (group:event; in a file recorded with --kernel also a kernel "
                   "event, e.g. block:block_rq_issue)")
      ->required();
  c->latency_cmd->add_option("--end", l.end, "End event (group:event or system:event)")->required();
  c->latency_cmd
      ->add_option("--key", l.key,
                   "Field pairing a begin with its end, or fields joined by '+' (dev+sector); "
                   "kernel events pair across CPUs")
      ->required();
  c->latency_cmd->add_option("--by", l.by, "Split by this field of the begin event");
  c->latency_cmd->add_option("--top", l.top, "List the N slowest pairs");
  c->latency_cmd->add_flag("--json", l.json, "Print JSON");

  ReportArgs& r = c->report_args;
  c->report_cmd = app.add_subcommand("report", "Write a self-contained HTML report");
  c->report_cmd->add_option("SOURCE", r.source, kSource)->required();
  c->report_cmd->add_option("-o,--output", r.output, "HTML file to write")->required();
  c->report_cmd->add_option("--pair", r.pairs,
                            "BEGIN,END,KEY latency pairs (default: inferred from event names)");
  c->report_cmd->add_option("--window-ms", r.window_ms, "Timeline window width (ms)")
      ->check(CLI::Range(0.001, 3.6e6));
  return c;
}

bool run_analysis_commands(const AnalysisCommands& c, int* status) {
  if (c.export_cmd->parsed()) {
    *status = cmd_export(c.export_args);
  } else if (c.latency_cmd->parsed()) {
    *status = cmd_latency(c.latency_args);
  } else if (c.report_cmd->parsed()) {
    *status = cmd_report(c.report_args);
  } else {
    return false;
  }
  return true;
}

}  // namespace nanotrace::cli
