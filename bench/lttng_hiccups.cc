// LTTng-UST's hiccups beside nanotrace's.
// - Start-up: the trivial twin (startup_twin.cc) with one LTTng-UST tracepoint, with one
//   nanotrace tracepoint and with none, in interleaved rounds (each round's order rotated),
//   first with no session daemon, then with one whose session records the event (lttng
//   create; enable-event -u twin:hello; start), as a user tracing short-lived programs would
//   run it. The session's trace is counted afterwards (babeltrace2): the figure is only given
//   if every LTTng run was recorded.
// - First events of new threads and the per-event tail: tail_twin built with each tracer,
//   run in alternation, LTTng-UST's in a flight-recorder session (lttng create --snapshot:
//   overwrite mode, as nanotrace's rings are by default); a snapshot taken afterwards must
//   hold its events, or the figure is not given.
//
//   lttng_hiccups [--quick] [--json FILE]
//
// --quick: 3 start-up rounds and one small tail round, for a smoke test. Needs root (the
// global session daemon) and lttng-tools; a session daemon already running makes "without a
// session daemon" impossible to measure, which the output then says.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spawn_timing.hpp"

extern "C" char** environ;

namespace {

// Wall time of each program, in rounds of one run each (order rotated every round); and the
// extra time of each over the first (the untraced twin), paired per round.
nlohmann::json rounds(const std::vector<std::string>& names, const std::vector<std::string>& paths,
                      int count) {
  const size_t n = paths.size();
  for (const std::string& p : paths) bench::spawn_and_wait_ns(p);  // warm the page cache
  std::vector<std::vector<double>> us(n), extra(n);
  for (int i = 0; i < count; ++i) {
    std::vector<uint64_t> t(n);
    for (size_t k = 0; k < n; ++k) {
      const size_t which = (static_cast<size_t>(i) + k) % n;
      t[which] = bench::spawn_and_wait_ns(paths[which]);
    }
    for (size_t k = 0; k < n; ++k) {
      us[k].push_back(static_cast<double>(t[k]) / 1e3);
      extra[k].push_back((static_cast<double>(t[k]) - static_cast<double>(t[0])) / 1e3);
    }
  }
  nlohmann::json out = {{"rounds", count}};
  for (size_t k = 0; k < n; ++k) {
    out[names[k]] = bench::spread_us(us[k]);
    if (k > 0) out[names[k] + "_minus_" + names[0]] = bench::spread_us(extra[k]);
  }
  return out;
}

bool run_quiet(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// A session daemon of our own (root's, without kernel tracing), stopped when this ends.
class SessionDaemon {
 public:
  bool start() {
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
    char* argv[] = {const_cast<char*>("lttng-sessiond"), const_cast<char*>("--no-kernel"), nullptr};
    const int rc = posix_spawnp(&pid_, "lttng-sessiond", &quiet, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&quiet);
    if (rc != 0) {
      pid_ = 0;
      return false;
    }
    for (int i = 0; i < 100; ++i) {  // up to 10 s for it to answer
      if (run_quiet("lttng list")) return true;
      usleep(100000);
    }
    return false;
  }
  ~SessionDaemon() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = 0;
};

// What a command prints on its standard output, or nothing if it failed.
std::optional<std::string> output_of(const std::string& command) {
  FILE* p = popen((command + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) text.append(buf, n);
  if (pclose(p) != 0) return std::nullopt;
  return text;
}

// Events named `name` in the trace under dir, as babeltrace2 prints them (one line each);
// -1 if it fails.
long count_events(const std::string& dir, const std::string& name) {
  const std::optional<std::string> text = output_of("babeltrace2 " + dir);
  if (!text) return -1;
  long events = 0;
  for (size_t at = 0; (at = text->find(name + ":", at)) != std::string::npos; at += name.size())
    ++events;
  return events;
}

// A started session of the session daemon, its trace under /tmp; destroyed with its trace
// when this ends.
class Session {
 public:
  // lttng create (with create_flags), enable-event --userspace `events`, start; false if any
  // of them fails.
  bool start(const std::string& kind, const std::string& create_flags, const std::string& events) {
    name_ = "nanotrace-" + kind + "-" + std::to_string(getpid());
    dir_ = "/tmp/" + name_;
    std::filesystem::remove_all(dir_);
    return run_quiet("lttng create " + name_ + " " + create_flags + " --output=" + dir_) &&
           run_quiet("lttng enable-event --userspace '" + events + "' --session=" + name_) &&
           run_quiet("lttng start " + name_);
  }
  ~Session() {
    if (name_.empty()) return;
    run_quiet("lttng destroy " + name_);
    std::filesystem::remove_all(dir_);
  }
  const std::string& name() const { return name_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string name_, dir_;
};

nlohmann::json with_session(const std::vector<std::string>& names,
                            const std::vector<std::string>& paths, int count) {
  Session session;
  if (!session.start("startup", "", "twin:hello")) {
    return "not measured: the LTTng session could not be set up";
  }
  nlohmann::json out = rounds(names, paths, count);
  const bool stopped = run_quiet("lttng stop " + session.name());
  const long events = stopped ? count_events(session.dir(), "twin:hello") : -1;
  // The warm-up run and one per round.
  const long expected = count + 1;
  out["lttng_events_recorded"] = events;
  out["lttng_runs"] = expected;
  if (events != expected) {
    return "not measured: the session recorded " + std::to_string(events) + " events of " +
           std::to_string(expected) + " runs";
  }
  return out;
}

// The figures to compare from one tail_twin run.
nlohmann::json tail_figures(const nlohmann::json& run) {
  const nlohmann::json& first = run.at("first_event");
  const nlohmann::json& event = run.at("per_event");
  const nlohmann::json& normal = event.at("normal");
  return {{"first_event_median_ns", first.at("median_ns")},
          {"first_event_p99_ns", first.at("p99_ns")},
          {"first_event_max_ns", first.at("max_ns")},
          {"first_event_page_faults_median", first.at("page_faults_median")},
          {"event_p50_ns", normal.at("p50_ns")},
          {"event_p99_ns", normal.at("p99_ns")},
          {"event_p99_9_ns", normal.at("p99_9_ns")},
          {"event_p99_99_ns", normal.at("p99_99_ns")},
          {"event_p99_999_ns", normal.at("p99_999_ns")},
          {"event_max_ns", normal.at("max_ns")},
          {"event_p99_99_over_batch_median", event.at("normal_over_batch_median").at("p99_99")},
          {"event_p99_99_over_batch_median_uninterrupted",
           event.at("uninterrupted_over_batch_median").at("p99_99")}};
}

// tail_twin built with each tracer, `count` runs of each in alternation (the order swapped
// every round), LTTng-UST's recording into a flight-recorder session.
nlohmann::json first_events_and_tail(const std::string& bin, int count, bool quick) {
  Session session;
  if (!session.start("tail", "--snapshot", "twin:*")) {
    return "not measured: the LTTng snapshot session could not be set up";
  }
  const std::string names[2] = {"nanotrace", "lttng_ust"};
  const std::string programs[2] = {bin + "/nanotrace_tail_traced", bin + "/nanotrace_tail_lttng"};
  nlohmann::json runs = {{names[0], nlohmann::json::array()}, {names[1], nlohmann::json::array()}};
  std::string failed;
  for (int i = 0; i < count && failed.empty(); ++i) {
    for (int k = 0; k < 2 && failed.empty(); ++k) {
      const int which = (i + k) % 2;
      const std::optional<std::string> text =
          output_of(programs[which] + (quick ? " --quick" : ""));
      nlohmann::json run = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
      if (!run.is_object() || !run.contains("first_event") || !run.contains("per_event")) {
        failed = programs[which] + " failed";
        continue;
      }
      runs[names[which]].push_back(tail_figures(run));
    }
  }
  const bool recorded = run_quiet("lttng snapshot record --session=" + session.name());
  const long events = recorded ? count_events(session.dir(), "twin:ev") : -1;
  if (!failed.empty()) return "not measured: " + failed;
  if (events <= 0) return "not measured: the LTTng snapshot holds no twin:ev event";
  return {{"method",
           "tail_twin (bench/tail_twin.cc) built with each tracer, runs alternating; first "
           "events of new threads one at a time; then 10 M events on a pinned thread after 1 M "
           "that filled the buffers, every sample kept (block and sub-buffer starts too), "
           "batches with a context switch discarded; LTTng-UST in a snapshot session"},
          {"runs_each", count},
          {"lttng_snapshot_events", events},
          {"runs", runs}};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: lttng_hiccups [--quick] [--json FILE]\n");
      return 2;
    }
  }
  const std::string dir = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  const std::vector<std::string> names = {"untraced", "nanotrace", "lttng_ust"};
  const std::vector<std::string> paths = {dir + "/nanotrace_startup_plain",
                                          dir + "/nanotrace_startup_traced",
                                          dir + "/nanotrace_startup_lttng"};
  const int count = quick ? 3 : 100;
  nlohmann::json out = {{"method",
                         "wall time from posix_spawn to reaping of the same trivial program "
                         "untraced, with a nanotrace tracepoint and with an LTTng-UST one, "
                         "interleaved rounds, medians"}};
  if (run_quiet("lttng list")) {
    out["without_session_daemon"] = "not measured: a session daemon is already running";
  } else {
    out["without_session_daemon"] = rounds(names, paths, count);
  }
  SessionDaemon daemon;
  if (daemon.start()) {
    out["with_session"] = with_session(names, paths, count);
    out["first_events_and_tail"] = first_events_and_tail(dir, quick ? 1 : 3, quick);
  } else {
    out["with_session"] = out["first_events_and_tail"] =
        "not measured: lttng-sessiond did not start (lttng-tools, root)";
  }
  const std::string text = out.dump(2);
  std::printf("%s\n", text.c_str());
  if (!json.empty()) std::ofstream(json) << text << "\n";
  const bool measured = out["without_session_daemon"].is_object() &&
                        out["with_session"].is_object() && out["first_events_and_tail"].is_object();
  return measured ? 0 : 1;
}
