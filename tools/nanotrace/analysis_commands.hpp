// The export and analysis subcommands of the nanotrace CLI: `export`, `latency`
// and `report`. main.cc registers them with one call and dispatches with another.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

namespace nanotrace::cli {

struct ExportArgs {
  std::string source;
  std::string format;
  std::string output;
  std::vector<std::string> slices;  // BEGIN,END,KEY
};
int cmd_export(const ExportArgs& args);

struct LatencyArgs {
  std::string source;
  std::string begin;
  std::string end;
  std::string key;
  std::string by;
  uint32_t top = 0;
  bool json = false;
};
int cmd_latency(const LatencyArgs& args);

struct ReportArgs {
  std::string source;
  std::string output;
  std::vector<std::string> pairs;  // BEGIN,END,KEY
  double window_ms = 10;
};
int cmd_report(const ReportArgs& args);

// The parsed options of the three subcommands (owned by main()).
struct AnalysisCommands {
  CLI::App* export_cmd = nullptr;
  CLI::App* latency_cmd = nullptr;
  CLI::App* report_cmd = nullptr;
  ExportArgs export_args;
  LatencyArgs latency_args;
  ReportArgs report_args;
};

// Adds `export`, `latency` and `report` to app.
std::unique_ptr<AnalysisCommands> register_analysis_commands(CLI::App& app);
// If one of them was parsed, runs it, stores its exit status in *status and returns true.
bool run_analysis_commands(const AnalysisCommands& commands, int* status);

}  // namespace nanotrace::cli
