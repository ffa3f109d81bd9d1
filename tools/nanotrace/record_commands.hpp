// `nanotrace record`, `snapshot`, `recover`, `clean`: registration with the CLI
// and dispatch, kept apart from main.cc so that main only gains two calls.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "commands.hpp"

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

}  // namespace nanotrace::cli
