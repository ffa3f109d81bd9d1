// Asking the clock-sync daemon how good CLOCK_REALTIME is (record/clock_sync.hpp). The daemons'
// own clients are run (no shell, no path from anywhere but PATH, a deadline, their output
// bounded): their sockets and protocols are theirs to keep.
#include "record/clock_sync.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "base/clock.hpp"

extern char** environ;

namespace nanotrace::rec {
namespace {

constexpr size_t kMaxOutput = 64 << 10;

// The standard output of argv (searched in PATH) if it exits with status 0 within timeout_ms.
std::optional<std::string> run_client(const std::vector<std::string>& args, int timeout_ms) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return std::nullopt;
  }
  std::string text;
  const double deadline = sys::monotonic_seconds() * 1e3 + timeout_ms;
  bool timed_out = false;
  for (;;) {
    const double left = deadline - sys::monotonic_seconds() * 1e3;
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left) + 1) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    if (text.size() < kMaxOutput) text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return text;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

// A decimal number of seconds as nanoseconds; nullopt if it is not one or is absurd.
std::optional<double> seconds_ns(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != 0 || !std::isfinite(v) || std::fabs(v) > 1e6) {
    return std::nullopt;
  }
  return v * 1e9;
}

}  // namespace

std::optional<ClockSync> parse_chrony_tracking(const std::string& csv_line) {
  // Reference ID, name, stratum, reference time, system time offset, last offset, RMS offset,
  // frequency, residual frequency, skew, root delay, root dispersion, update interval, leap.
  std::string line = csv_line.substr(0, csv_line.find('\n'));
  std::vector<std::string> f = split(line, ',');
  if (f.size() != 14) return std::nullopt;
  auto offset = seconds_ns(f[4]);
  auto delay = seconds_ns(f[10]);
  auto dispersion = seconds_ns(f[11]);
  char* end = nullptr;
  long stratum = std::strtol(f[2].c_str(), &end, 10);
  if (!offset || !delay || !dispersion || end == f[2].c_str() || *end != 0 || *delay < 0 ||
      *dispersion < 0) {
    return std::nullopt;
  }
  ClockSync s;
  s.source = file::SyncSource::kChrony;
  s.offset_ns = static_cast<int64_t>(std::llround(*offset));
  s.root_delay_ns = static_cast<uint64_t>(std::llround(*delay));
  s.root_dispersion_ns = static_cast<uint64_t>(std::llround(*dispersion));
  s.reference = f[1];
  // Stratum 16 or "Not synchronised": no reference, so no bound.
  s.synchronised = stratum > 0 && stratum < 16 && f[13] != "Not synchronised";
  if (s.synchronised) {
    s.bound_ns =
        static_cast<uint64_t>(std::llabs(s.offset_ns)) + s.root_dispersion_ns + s.root_delay_ns / 2;
  }
  return s;
}

std::optional<ClockSync> parse_pmc_time_status(const std::string& text) {
  std::optional<int64_t> offset;
  bool gm_present = false;
  std::istringstream in(text);
  std::string key, value;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    if (!(words >> key >> value)) continue;
    if (key == "master_offset") {
      char* end = nullptr;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (end != value.c_str() && *end == 0) offset = v;
    } else if (key == "gmPresent") {
      gm_present = value == "true";
    }
  }
  if (!offset) return std::nullopt;
  ClockSync s;
  s.source = file::SyncSource::kPtp;
  s.offset_ns = *offset;
  s.reference = "ptp4l";
  s.synchronised = gm_present;
  if (gm_present) s.bound_ns = static_cast<uint64_t>(std::llabs(*offset));
  return s;
}

ClockSync read_clock_sync(int timeout_ms) {
  std::vector<std::string> chronyc = {"chronyc", "-c", "-n"};
  if (const char* socket = std::getenv("NANOTRACE_CHRONY_SOCKET"); socket && *socket) {
    chronyc.insert(chronyc.end(), {"-h", socket});
  }
  chronyc.push_back("tracking");
  if (auto out = run_client(chronyc, timeout_ms)) {
    if (auto s = parse_chrony_tracking(*out)) return *s;
  }
  // pmc waits for answers that never come when no ptp4l runs: asked only if ptp4l's
  // management socket (its default uds_address) is there.
  if (access("/var/run/ptp4l", F_OK) != 0) return ClockSync{};
  if (auto out = run_client({"pmc", "-u", "-b", "0", "GET TIME_STATUS_NP"}, timeout_ms)) {
    if (auto s = parse_pmc_time_status(*out)) return *s;
  }
  return ClockSync{};
}

}  // namespace nanotrace::rec
