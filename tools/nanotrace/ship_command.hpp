// `nanotrace ship`: registration with the CLI and dispatch, kept apart from main.cc so that
// main only gains two calls.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace nanotrace::cli {

struct ShipCommand {
  CLI::App* ship = nullptr;
  std::vector<std::string> sources;
  std::vector<std::string> servers;
  std::string database = "nanotrace";
  std::string cluster;
  std::string node;
  std::vector<std::string> pairs;  // BEGIN,END,KEY
  size_t batch_rows = 1 << 20;
  size_t connections = 2;
  std::string retry_for = "30s";  // how long transient errors are retried, per trace
  std::string compress = "auto";  // auto, zstd, none
  bool no_compress = false;       // --compress none
  bool json = false;
};

// Adds `ship` to app.
void register_ship_command(CLI::App& app, ShipCommand* command);
// Runs `ship` if parsed; false otherwise.
bool run_ship_command(const ShipCommand& command, int* status);

}  // namespace nanotrace::cli
