// Pieces the subcommands share: ring options on the command line, error printing and
// order statistics.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "iograph/executor.hpp"

namespace iograph::cli {

// Adds --qd, --sqpoll, --coop-taskrun, --defer-taskrun, --fixed-files, --fixed-buffers.
void add_ring_options(CLI::App& app, ExecOptions& options);

// Prints "iograph: <message>" on stderr and returns 1.
int fail(const std::string& message);
int fail(const Status& status);

// Nearest-rank percentile (0 < p <= 100) of `values`, which it sorts.
double percentile(std::vector<double>& values, double p);
double median(std::vector<double> values);

// Splits "a,b,c" (no parentheses involved).
std::vector<std::string> split_list(const std::string& text);

}  // namespace iograph::cli
