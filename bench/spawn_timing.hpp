// Timing a program's whole life from its parent (posix_spawn to reaping), and the spread of
// such timings: what the start-up benchmarks (hiccups.cc, lttng_hiccups.cc) share.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bench {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

template <class T>
T percentile(std::vector<T> v, double p) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Runs path with no arguments and an empty environment; nanoseconds until it was reaped, 0 if
// it could not be started.
inline uint64_t spawn_and_wait_ns(const std::string& path) {
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  char* envp[] = {nullptr};
  uint64_t t0 = now_ns();
  pid_t pid;
  if (posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv, envp) != 0) return 0;
  int status;
  waitpid(pid, &status, 0);
  return now_ns() - t0;
}

// Median, p10, p90, min and max of microsecond figures.
inline nlohmann::json spread_us(const std::vector<double>& v) {
  return nlohmann::json{{"median_us", percentile(v, 50)},
                        {"p10_us", percentile(v, 10)},
                        {"p90_us", percentile(v, 90)},
                        {"min_us", percentile(v, 0)},
                        {"max_us", percentile(v, 100)}};
}

}  // namespace bench
