// `nanotrace record`, `snapshot`, `recover`, `clean`: registration with the CLI
// and dispatch, kept apart from main.cc so that main only gains two calls.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "nanotrace/record.hpp"

namespace nanotrace::cli {

struct RecordCommands {
  CLI::App* record = nullptr;
  CLI::App* snapshot = nullptr;
  CLI::App* recover = nullptr;
  CLI::App* clean = nullptr;
  std::string source, output, groups, stop_on, snapshot_on, kernel;
  std::vector<std::string> sources;  // record
  uint32_t kernel_buffer_kb = 4096;
  uint32_t kernel_flight_buffer_kb = 4096;
  double duration = 0;
  bool compress = false;
  bool dry_run = false;
};

void register_record_commands(CLI::App& app, RecordCommands* commands);
// Runs the parsed subcommand if it is one of these; false otherwise.
bool run_record_commands(const RecordCommands& commands, int* status);
// What the triggers of a recording did (`record`, `run`): the record --stop-on matched, a
// duration trigger's pairing counts and each snapshot written, one line each on stderr, each
// line starting with prefix.
void print_trigger_outcome(const std::string& prefix, const std::string& stop_match,
                           const std::vector<std::string>& snapshots,
                           const std::vector<SnapshotKernel>& snapshot_kernel,
                           const std::vector<std::string>& trigger_counts);

}  // namespace nanotrace::cli
