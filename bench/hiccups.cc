// Hiccups: what tracing adds outside the median event cost, each figure measured against
// its own baseline in the same run.
//
//   hiccups [--quick] [--json FILE]
//
// - start-up: a trivial program with one tracepoint against its untraced twin and against
//   the floor (the same program doing plainly the least a tracer of this design must: a
//   shared-memory file and a thread), interleaved (wall time from posix_spawn to reaping);
// - first event of a new thread: rdtsc around the first tracepoint of each of many new
//   threads, one at a time;
// - per event: rdtsc around each call on a thread pinned to one CPU, in batches; a batch
//   during which the thread was switched out (getrusage(RUSAGE_THREAD) counts) is discarded,
//   and samples that started a new block (the slot's head crossed a block boundary) or
//   touched the ring for the first time (first lap) are reported apart (block starts of the
//   first lap also pay the page faults);
// - block start: the cost of those block-start samples beyond the median sample;
// - exit: from a program's return from main to its parent reaping it, the program having
//   recorded 100,000 events, with `nanotrace record` attached, without, and untraced.
// --quick: a few samples of each, for a smoke test (no figure is meaningful then).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanotrace_probe.hpp"
#include "spawn_timing.hpp"
#include "tail_timing.hpp"

namespace {

using bench::now_ns;
using bench::percentile;
using bench::spawn_and_wait_ns;

// The traced twin, the untraced one and the floor (startup_floor.cc: what any tracer with a
// shared-memory file and a thread of its own must do at start-up, written plainly) in
// interleaved rounds; each round's order is rotated so none always runs on a warmer machine.
nlohmann::json startup(const std::string& dir, int pairs) {
  const std::string programs[3] = {dir + "/nanotrace_startup_traced",
                                   dir + "/nanotrace_startup_plain",
                                   dir + "/nanotrace_startup_floor"};
  for (const std::string& p : programs) spawn_and_wait_ns(p);  // warm the page cache
  std::vector<double> a, b, f, diff, floor_diff;
  for (int i = 0; i < pairs; ++i) {
    uint64_t t[3];
    for (int k = 0; k < 3; ++k) {
      const int which = (i + k) % 3;
      t[which] = spawn_and_wait_ns(programs[which]);
    }
    a.push_back(t[0] / 1e3);
    b.push_back(t[1] / 1e3);
    f.push_back(t[2] / 1e3);
    diff.push_back((static_cast<double>(t[0]) - static_cast<double>(t[1])) / 1e3);
    floor_diff.push_back((static_cast<double>(t[2]) - static_cast<double>(t[1])) / 1e3);
  }
  const auto& stats = bench::spread_us;
  const double floor_extra = percentile(floor_diff, 50);
  return {
      {"pairs", pairs},
      {"traced", stats(a)},
      {"untraced", stats(b)},
      {"floor", stats(f)},
      {"traced_minus_untraced", stats(diff)},
      {"floor_minus_untraced", stats(floor_diff)},
      {"traced_extra_over_floor_extra", floor_extra > 0 ? percentile(diff, 50) / floor_extra : 0.0},
      {"target_median_extra_us", 300}};
}

// Runs exit_twin with pipes on stdin and stdout; with `recorder`, attaches `nanotrace record`
// to it once it is ready. Returns the nanoseconds from its return from main to its reaping,
// or -1 on failure.
double exit_cost_ns(const std::string& dir, const std::string& program, bool recorder) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  posix_spawn_file_actions_addclose(&actions, to_child[1]);
  posix_spawn_file_actions_addclose(&actions, from_child[0]);
  std::string path = dir + "/" + program;
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  char* envp[] = {nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  if (rc != 0) return -1;
  FILE* out = fdopen(from_child[0], "r");
  char line[64] = {};
  bool ready = std::fgets(line, sizeof(line), out) != nullptr;
  pid_t rec = -1;
  std::string file = "/dev/shm/hiccups-exit-" + std::to_string(getpid()) + ".ntr";
  if (ready && recorder) {
    std::string cli = dir + "/nanotrace", target = std::to_string(pid);
    char* rargv[] = {const_cast<char*>(cli.c_str()),    const_cast<char*>("record"),
                     const_cast<char*>(target.c_str()), const_cast<char*>("-o"),
                     const_cast<char*>(file.c_str()),   nullptr};
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&rec, cli.c_str(), &quiet, nullptr, rargv, envp) != 0) rec = -1;
    posix_spawn_file_actions_destroy(&quiet);
    // Attached once the segment names a consumer (at most 10 s).
    bool attached = false;
    for (int i = 0; rec > 0 && i < 10000 && !attached; ++i) {
      auto trace = nanotrace::Trace::open_pid(pid);
      attached = trace.ok() && (*trace)->process().consumer_pid != 0;
      if (!attached) usleep(1000);
    }
    ready = attached;
  }
  // The same pause before exit in every variant: how long the machine sat idle changes how
  // long an exit takes (a virtual CPU that halted wakes slowly), and attaching a recorder
  // takes tens of milliseconds.
  usleep(50 * 1000);
  if (write(to_child[1], "go\n", 3) != 3) ready = false;
  close(to_child[1]);
  uint64_t returned = 0;
  if (ready && std::fgets(line, sizeof(line), out) != nullptr)
    returned = std::strtoull(line, nullptr, 10);
  int status;
  waitpid(pid, &status, 0);
  uint64_t reaped = now_ns();
  std::fclose(out);
  if (rec > 0) {
    int rec_status;
    waitpid(rec, &rec_status, 0);
    unlink(file.c_str());
    if (!WIFEXITED(rec_status) || WEXITSTATUS(rec_status) != 0) return -1;
  }
  if (!ready || returned == 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return static_cast<double>(reaped) - static_cast<double>(returned);
}

// Exit, three ways in interleaved rounds.
nlohmann::json exits(const std::string& dir, int rounds) {
  std::vector<double> recorded, traced, plain;
  int failures = 0;
  for (int i = 0; i < rounds; ++i) {
    double r = exit_cost_ns(dir, "nanotrace_exit_traced", true);
    double t = exit_cost_ns(dir, "nanotrace_exit_traced", false);
    double p = exit_cost_ns(dir, "nanotrace_exit_plain", false);
    if (r < 0 || t < 0 || p < 0) {
      ++failures;
      continue;
    }
    recorded.push_back(r / 1e3);
    traced.push_back(t / 1e3);
    plain.push_back(p / 1e3);
  }
  auto stats = [](const std::vector<double>& v) {
    return nlohmann::json{{"median_us", percentile(v, 50)}, {"max_us", percentile(v, 100)}};
  };
  return {{"rounds", rounds},
          {"failed_rounds", failures},
          {"method", "from the program's return from main (100,000 events recorded) to waitpid"},
          {"with_recorder_attached", stats(recorded)},
          {"traced", stats(traced)},
          {"untraced", stats(plain)},
          {"target_extra_us", 1000}};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string json, only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: hiccups [--quick] [--json FILE] "
                   "[--only startup|first_event|per_event|exit]\n");
      return 2;
    }
  }
  // The start-up twins are built beside this program.
  std::string dir = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  double tpn = bench::ticks_per_ns(quick ? 20 : 200);
  nlohmann::json out = {{"ticks_per_ns", tpn}, {"quick", quick}};
  auto wanted = [&](const char* part) { return only.empty() || only == part; };
  if (wanted("startup")) out["startup"] = startup(dir, quick ? 3 : 100);
  bench::NanotraceProbe probe;
  if (wanted("first_event"))
    out["first_event"] = bench::first_events(probe, quick ? 20 : 1000, tpn);
  if (wanted("per_event"))
    out["per_event"] = bench::per_event(probe, quick ? 20000 : 10000000, tpn);
  if (wanted("exit")) out["exit"] = exits(dir, quick ? 2 : 20);
  out["lttng_ust"] =
      "start-up with and without a session, first events and per-event tail beside ours: "
      "bench/lttng_hiccups.cc (build/bench/lttng-hiccups.json)";
  std::string text = out.dump(2);
  std::printf("%s\n", text.c_str());
  if (!json.empty()) std::ofstream(json) << text << "\n";
  return 0;
}
