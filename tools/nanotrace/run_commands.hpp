// `nanotrace run` and `nanotrace summary`: registration with the CLI and dispatch, kept apart
// from main.cc so that main only gains two calls.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "commands.hpp"

namespace nanotrace::cli {

struct RunCommand {
  CLI::App* run = nullptr;
  CLI::App* summary_cmd = nullptr;
  std::string output;
  std::vector<std::string> command;
  bool summary = false;
  bool compress = false;
  std::vector<std::string> kernel;
  uint32_t kernel_buffer_kb = 4096;
  uint32_t kernel_flight_buffer_kb = 4096;
  std::string stop_on, snapshot_on;
  std::string source;  // summary
  bool json = false;   // summary
};

// Adds `run` and `summary` to app.
void register_run_command(CLI::App& app, RunCommand* command);
void register_summary_command(CLI::App& app, RunCommand* command);
// Runs `run` or `summary` if parsed; false otherwise.
bool run_run_command(const RunCommand& command, int* status);
// The I/O summary of a trace file (cmd_summary.cc). Returns the exit status.
int print_io_summary(const std::string& source, bool json);

}  // namespace nanotrace::cli
