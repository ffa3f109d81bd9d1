// `nanotrace agent` and `nanotrace fleet ...`: registration with the CLI and dispatch, kept
// apart from main.cc so that main only gains two calls.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace nanotrace::cli {

struct FleetCommands {
  CLI::App* agent = nullptr;
  CLI::App* fleet = nullptr;
  CLI::App *arm = nullptr, *disarm = nullptr, *snapshot = nullptr, *status = nullptr,
           *collect = nullptr, *resume = nullptr, *fetch = nullptr, *top = nullptr;
  // Shared by agent and fleet.
  std::string broker = "nats://127.0.0.1:4222";
  std::string credentials = "/etc/nanotrace/fleet.credentials";
  std::string fleet_name = "default";
  // agent
  std::string node, spool = "/var/spool/nanotrace", metrics;
  std::string rate = "10s";
  std::string copy_delay = "2ms";
  std::string announce_for = "5s";
  int scan_ms = 1000;
  std::string kernel;
  uint32_t kernel_flight_buffer_kb = 4096;
  std::vector<std::string> ship_servers;
  std::string ship_database = "nanotrace", ship_cluster, ship_retry_max = "30s";
  std::vector<std::string> pairs;  // BEGIN,END,KEY
  std::string live_interval = "1s";
  uint32_t live_waiters = 20;
  // fleet
  std::string expression, before, after, dir, round, wait = "10s";
  std::string fetch_node, fetch_file, output;
  std::string nodes;  // a count, or the nodes' names (comma-separated)
  size_t parallel = 4;
  bool no_zstd = false;
  int timeout_ms = 3000;
  uint32_t waiters = 20;  // fleet top
  bool top_once = false;
  double top_interval_s = 1.0;
  bool json = false;
};

void register_fleet_commands(CLI::App& app, FleetCommands* commands);
// Runs the parsed subcommand if it is one of these; false otherwise.
bool run_fleet_commands(const FleetCommands& commands, int* status);

}  // namespace nanotrace::cli
