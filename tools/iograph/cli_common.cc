// Shared command-line helpers of the iograph tool.
#include "cli_common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace iograph::cli {

void add_ring_options(CLI::App& app, ExecOptions& options) {
  app.add_option("--qd", options.queue_depth, "Queue depth: most operations in flight")
      ->check(CLI::Range(1, 32768))
      ->capture_default_str();
  app.add_flag("--sqpoll", options.sqpoll, "IORING_SETUP_SQPOLL");
  app.add_flag("--coop-taskrun", options.coop_taskrun, "IORING_SETUP_COOP_TASKRUN");
  app.add_flag("--defer-taskrun", options.defer_taskrun,
               "IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN");
  app.add_flag("--fixed-files", options.fixed_files, "Register the target's file");
  app.add_flag("--fixed-buffers", options.fixed_buffers,
               "Register the buffer pool (read_fixed/write_fixed)");
}

int fail(const std::string& message) {
  fmt::print(stderr, "iograph: {}\n", message);
  return 1;
}

int fail(const Status& status) { return fail(status.message()); }

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace iograph::cli
