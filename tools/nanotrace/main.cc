// nanotrace: inspect and control traced processes (list, events, enable, disable, dump,
// stats). A SOURCE is a pid, "name:NAME" (NANOTRACE_NAME of a live process), or the path of a
// segment.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "analysis_commands.hpp"
#include "commands.hpp"
#include "diff_command.hpp"
#include "fleet_commands.hpp"   // agent, fleet
#include "record_commands.hpp"  // record, snapshot, recover, clean
#include "reference_command.hpp"
#include "run_commands.hpp"  // run, summary
#include "ship_command.hpp"  // ship

int main(int argc, char** argv) {
  using namespace nanotrace::cli;
  CLI::App app{"nanotrace: always-on tracing for storage and I/O software"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for all subcommands");
  bool json = false;
  std::string source;
  std::vector<std::string> groups;

  auto* list = app.add_subcommand("list", "List traced processes (live and left behind)");
  list->add_flag("--json", json, "Print JSON");

  auto* events = app.add_subcommand("events", "List every declared event and its fields");
  events->add_option("SOURCE", source, "pid, name:NAME or segment path")->required();
  events->add_flag("--json", json, "Print JSON");

  auto* enable = app.add_subcommand("enable", "Enable event groups in a live process");
  enable->add_option("SOURCE", source, "pid, name:NAME or segment path")->required();
  enable->add_option("GROUPS", groups, "e.g. all, io,sched or all,-debug")->required();
  auto* disable = app.add_subcommand("disable", "Disable event groups in a live process");
  disable->add_option("SOURCE", source, "pid, name:NAME or segment path")->required();
  disable->add_option("GROUPS", groups, "e.g. all, io,sched or all,-debug")->required();

  DumpOptions dump_options;
  auto* dump = app.add_subcommand("dump", "Print the records in the rings, merged by time");
  dump->add_option("SOURCE", source, "pid, name:NAME or segment path")->required();
  dump->add_flag("--json", dump_options.json, "One JSON object per line");
  dump->add_option("-n,--limit", dump_options.limit, "Print at most N records");
  dump->add_option("-e,--event", dump_options.events, "Only these events (group:event or group)");

  auto* stats = app.add_subcommand("stats", "Counts, rates and losses per event and thread");
  stats->add_option("SOURCE", source, "pid, name:NAME or segment path")->required();
  stats->add_flag("--json", json, "Print JSON");

  auto* breakdown = app.add_subcommand(
      "breakdown", "Where each iograph I/O's time went, joined with its kernel events");
  breakdown->add_option("SOURCE", source, "trace file recorded with --kernel io_uring,block")
      ->required();
  breakdown->add_flag("--json", json, "Print JSON");

  std::vector<std::string> merge_inputs;
  std::string merge_output;
  auto* merge = app.add_subcommand(
      "merge", "Merge several nodes' snapshots into one trace file, aligned in time");
  merge
      ->add_option("SNAPSHOTS", merge_inputs,
                   "trace files, one node each; the first is the "
                   "reference clock")
      ->required();
  merge->add_option("-o,--output", merge_output, "the merged trace file")->required();
  merge->add_flag("--json", json, "Print JSON");

  // export, latency, report: see analysis_commands.hpp.
  // Triggers: arm, disarm, resume, status.
  std::string expression, after;
  auto* arm = app.add_subcommand("arm", "Arm a trigger that freezes the rings on an event");
  arm->add_option("SOURCE", source, "pid or name:NAME of a live process")->required();
  arm->add_option("EXPR", expression, "e.g. 'io:error' or 'io:complete lat_us>1000'")->required();
  arm->add_option("--after", after, "keep recording N events (or 500us, 2ms) after the match");
  auto* disarm = app.add_subcommand("disarm", "Disarm the trigger of a live process");
  disarm->add_option("SOURCE", source, "pid or name:NAME")->required();
  auto* resume = app.add_subcommand("resume", "Unfreeze rings a trigger froze (stays armed)");
  resume->add_option("SOURCE", source, "pid or name:NAME")->required();
  auto* status = app.add_subcommand("status", "Process state, crash and trigger details");
  status->add_option("SOURCE", source, "pid, name:NAME or segment path")->required();

  auto analysis = register_analysis_commands(app);
  auto diff = register_diff_command(app);

  RecordCommands record_commands;  // record, snapshot, recover, clean
  register_record_commands(app, &record_commands);
  RunCommand run_command;  // run, summary
  register_run_command(app, &run_command);
  ShipCommand ship_command;
  register_ship_command(app, &ship_command);
  FleetCommands fleet_commands;  // agent, fleet
  register_fleet_commands(app, &fleet_commands);
  auto* reference = register_reference_command(app);

  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOFBF, 1 << 16);
  if (reference->parsed()) return cmd_reference(app);
  if (list->parsed()) return cmd_list(json);
  if (events->parsed()) return cmd_events(source, json);
  if (enable->parsed()) return cmd_enable(source, groups, true);
  if (disable->parsed()) return cmd_enable(source, groups, false);
  if (dump->parsed()) return cmd_dump(source, dump_options);
  if (stats->parsed()) return cmd_stats(source, json);
  if (merge->parsed()) return cmd_merge(merge_inputs, merge_output, json);
  if (breakdown->parsed()) return cmd_breakdown(source, json);
  if (arm->parsed()) return cmd_arm(source, expression, after);
  if (disarm->parsed()) return cmd_disarm(source);
  if (resume->parsed()) return cmd_resume(source);
  if (status->parsed()) return cmd_status(source);
  if (int status = 1; run_analysis_commands(*analysis, &status)) return status;
  if (int status = 1; run_diff_command(*diff, &status)) return status;
  if (int status = 1; run_record_commands(record_commands, &status)) return status;
  if (int status = 1; run_fleet_commands(fleet_commands, &status)) return status;
  if (int status = 1; run_run_command(run_command, &status)) return status;
  if (int status = 1; run_ship_command(ship_command, &status)) return status;
  return 1;
}
