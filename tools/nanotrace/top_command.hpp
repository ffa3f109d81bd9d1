// `nanotrace top`: registration and dispatch (cmd_top.cc).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace nanotrace::cli {

struct TopArgs {
  std::vector<std::string> sources;
  std::vector<std::string> pairs;  // BEGIN,END,KEY
  double interval_s = 1;
  bool once = false;
  bool json = false;
  uint32_t waiters = 20;
  uint32_t max_open = 100000;
};
int cmd_top(const TopArgs& args);

struct TopCommand {
  TopArgs args;
  CLI::App* top = nullptr;
};
void register_top_command(CLI::App& app, TopCommand* command);
// If `top` was parsed, runs it, stores its exit status in *status and returns true.
bool run_top_command(const TopCommand& command, int* status);

}  // namespace nanotrace::cli
