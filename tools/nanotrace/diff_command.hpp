// `nanotrace diff A B`: registration and dispatch (cmd_diff.cc).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

namespace nanotrace::cli {

struct DiffArgs {
  std::string a, b;                // comma-separated runs
  std::vector<std::string> pairs;  // BEGIN,END,KEY
  bool json = false;
  std::string html;
  double alpha = 0.05;
  double min_change = 5;  // percent
  uint32_t resamples = 2000;
  uint64_t seed = 0x6e616e6f74726163;
  CLI::App* command = nullptr;
};

std::unique_ptr<DiffArgs> register_diff_command(CLI::App& app);
// If `diff` was parsed, runs it, stores its exit status in *status and returns true.
bool run_diff_command(const DiffArgs& args, int* status);

}  // namespace nanotrace::cli
