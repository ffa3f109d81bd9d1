// The iograph subcommands. Each add_* function registers its options on `app` and returns
// the action main() runs when that subcommand was chosen; the action returns the exit code
// (0 success, 1 error, 3 a graph ran but some of its nodes failed).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace iograph::cli {

using Action = std::function<int()>;

Action add_gen_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_perf_command(CLI::App& app);

}  // namespace iograph::cli
