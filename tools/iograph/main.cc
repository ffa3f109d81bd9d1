// iograph: generate I/O dependency graphs, run them on io_uring, benchmark the backends, and
// measure nanotrace's cost per I/O. See docs/iograph.md.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"iograph: I/O dependency graphs on io_uring (see docs/iograph.md)"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, iograph::cli::Action>> commands;
  auto add = [&](const char* name, const char* help, auto registrar) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands.emplace_back(sub, registrar(*sub));
  };
  add("gen", "Generate a graph and write it as JSON", iograph::cli::add_gen_command);
  add("run", "Execute one graph and print per-node timings", iograph::cli::add_run_command);
  add("bench", "Compare backends over shapes (median and p99 per graph)",
      iograph::cli::add_bench_command);
  add("perf", "Null-I/O IOPS with tracing off and on, against the tracepoint floor",
      iograph::cli::add_perf_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  for (auto& [sub, action] : commands) {
    if (sub->parsed()) return action();
  }
  return 2;
}
