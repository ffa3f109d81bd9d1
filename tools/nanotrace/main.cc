// nanotrace: inspect and control traced processes (list, events, enable, disable, dump,
// stats). A SOURCE is a pid, "name:NAME" (NANOTRACE_NAME of a live process), or the path of a
// segment.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "analysis_commands.hpp"
#include "commands.hpp"
#include "diff_command.hpp"
#include "network_commands.hpp"  // agent, fleet, ship
#include "record_commands.hpp"   // record, snapshot, recover, clean
#include "reference_command.hpp"
#include "run_commands.hpp"  // run, summary
#include "top_command.hpp"

namespace {

using namespace nanotrace::cli;

// The commands that read or switch one source: list, events, enable, disable, dump, stats,
// breakdown; and merge.
struct InspectCommands {
  bool json = false;
  std::string source;
  std::vector<std::string> groups;
  DumpOptions dump_options;
  std::vector<std::string> merge_inputs;
  std::string merge_output;
  CLI::App *list, *events, *enable, *disable, *dump, *stats, *breakdown, *merge;
};

void register_inspect_commands(CLI::App& app, InspectCommands* c) {
  c->list = app.add_subcommand("list", "List traced processes (live and left behind)");
  c->list->add_flag("--json", c->json, "Print JSON");

  c->events = app.add_subcommand("events", "List every declared event and its fields");
  c->events->add_option("SOURCE", c->source, "pid, name:NAME or segment path")->required();
  c->events->add_flag("--json", c->json, "Print JSON");

  c->enable = app.add_subcommand("enable", "Enable event groups in a live process");
  c->disable = app.add_subcommand("disable", "Disable event groups in a live process");
  for (CLI::App* sub : {c->enable, c->disable}) {
    sub->add_option("SOURCE", c->source, "pid, name:NAME or segment path")->required();
    sub->add_option("GROUPS", c->groups, "e.g. all, io,sched or all,-debug")->required();
  }

  c->dump = app.add_subcommand("dump", "Print the records in the rings, merged by time");
  c->dump->add_option("SOURCE", c->source, "pid, name:NAME or segment path")->required();
  c->dump->add_flag("--json", c->dump_options.json, "One JSON object per line");
  c->dump->add_option("-n,--limit", c->dump_options.limit, "Print at most N records");
  c->dump->add_option("-e,--event", c->dump_options.events,
                      "Only these events (group:event or group)");

  c->stats = app.add_subcommand("stats", "Counts, rates and losses per event and thread");
  c->stats->add_option("SOURCE", c->source, "pid, name:NAME or segment path")->required();
  c->stats->add_flag("--json", c->json, "Print JSON");

  c->breakdown = app.add_subcommand(
      "breakdown", "Where each iograph I/O's time went, joined with its kernel events");
  c->breakdown->add_option("SOURCE", c->source, "trace file recorded with --kernel io_uring,block")
      ->required();
  c->breakdown->add_flag("--json", c->json, "Print JSON");

  c->merge = app.add_subcommand(
      "merge", "Merge several nodes' snapshots into one trace file, aligned in time");
  c->merge
      ->add_option("SNAPSHOTS", c->merge_inputs,
                   "trace files, one node each; the first is the reference clock")
      ->required();
  c->merge->add_option("-o,--output", c->merge_output, "the merged trace file")->required();
  c->merge->add_flag("--json", c->json, "Print JSON");
}

// True if one of them was given; *status: its exit status.
bool run_inspect_commands(const InspectCommands& c, int* status) {
  if (c.list->parsed()) {
    *status = cmd_list(c.json);
  } else if (c.events->parsed()) {
    *status = cmd_events(c.source, c.json);
  } else if (c.enable->parsed() || c.disable->parsed()) {
    *status = cmd_enable(c.source, c.groups, c.enable->parsed());
  } else if (c.dump->parsed()) {
    *status = cmd_dump(c.source, c.dump_options);
  } else if (c.stats->parsed()) {
    *status = cmd_stats(c.source, c.json);
  } else if (c.merge->parsed()) {
    *status = cmd_merge(c.merge_inputs, c.merge_output, c.json);
  } else if (c.breakdown->parsed()) {
    *status = cmd_breakdown(c.source, c.json);
  } else {
    return false;
  }
  return true;
}

// A live process's trigger: arm, disarm, resume; and status.
struct TriggerCommands {
  std::string source, expression, after;
  CLI::App *arm, *disarm, *resume, *status;
};

void register_trigger_commands(CLI::App& app, TriggerCommands* c) {
  c->arm = app.add_subcommand("arm", "Arm a trigger that freezes the rings on an event");
  c->arm->add_option("SOURCE", c->source, "pid or name:NAME of a live process")->required();
  c->arm->add_option("EXPR", c->expression, "e.g. 'io:error' or 'io:complete lat_us>1000'")
      ->required();
  c->arm->add_option("--after", c->after,
                     "keep recording N events (or 500us, 2ms) after the match");
  c->disarm = app.add_subcommand("disarm", "Disarm the trigger of a live process");
  c->disarm->add_option("SOURCE", c->source, "pid or name:NAME")->required();
  c->resume = app.add_subcommand("resume", "Unfreeze rings a trigger froze (stays armed)");
  c->resume->add_option("SOURCE", c->source, "pid or name:NAME")->required();
  c->status = app.add_subcommand("status", "Process state, crash and trigger details");
  c->status->add_option("SOURCE", c->source, "pid, name:NAME or segment path")->required();
}

bool run_trigger_commands(const TriggerCommands& c, int* status) {
  if (c.arm->parsed()) {
    *status = cmd_arm(c.source, c.expression, c.after);
  } else if (c.disarm->parsed()) {
    *status = cmd_disarm(c.source);
  } else if (c.resume->parsed()) {
    *status = cmd_resume(c.source);
  } else if (c.status->parsed()) {
    *status = cmd_status(c.source);
  } else {
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nanotrace: always-on tracing for storage and I/O software"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for all subcommands");
  InspectCommands inspect;
  register_inspect_commands(app, &inspect);
  TriggerCommands triggers;
  register_trigger_commands(app, &triggers);
  TopCommand top_command;
  register_top_command(app, &top_command);
  auto analysis = register_analysis_commands(app);  // export, latency, report
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
  int status = 1;
  if (run_inspect_commands(inspect, &status) || run_trigger_commands(triggers, &status) ||
      run_top_command(top_command, &status) || run_analysis_commands(*analysis, &status) ||
      run_diff_command(*diff, &status) || run_record_commands(record_commands, &status) ||
      run_run_command(run_command, &status) ||
      run_network_commands(fleet_commands, ship_command, argv, &status)) {
    return status;
  }
  return 1;
}
