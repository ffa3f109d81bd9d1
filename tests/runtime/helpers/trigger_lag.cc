// Trigger lag under descheduling: T threads share one CPU, and the one whose record matches
// runs at SCHED_IDLE, so it is likely to lose the CPU between the match and the freeze.
// Each run arms a trigger with a window of W events (nanotrace::arm_trigger), waits for the
// freeze, reads this process's own segment and counts the records published after the
// match (clock value later than the segment's trigger_ticks; the matching record excluded),
// and which record the trigger names (the test:fire record stamped at trigger_ticks: its run
// must be this run's; the matching thread may not have published it yet, descheduled after
// another completed its firing), then resumes. The contract: at most W plus one per thread.
//
//   trigger_lag [--runs N] [--threads T] [--window W] [--json FILE] [--quick] [--no-idle]
//               [--inject]
//
// Prints one line per run, "run R after A bound B match M" (M: the run of the record the
// trigger names, 0 if not published yet), and a summary; --json writes the
// figures (median and maximum of A - W). Exits 1 if a run timed out or could not be read;
// the bound itself is the caller's to check. --no-idle: the matcher at normal priority. Set the
// ring size with NANOTRACE_BUFFER. --inject: the descheduling that broke the bound, made to
// happen in every run through the runtime's test hook (runtime.hpp, found with dlsym, so that
// the program still runs on a runtime without it): the matching thread sleeps 100 ms right
// after announcing its firing (the others complete it, and the run is over before it wakes),
// and whoever stamps a match sleeps 2 ms before opening the window.
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <nanotrace/reader.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.hpp"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_armed_run{0};
bool g_idle = true;
thread_local bool t_matcher = false;

using nanotrace::runtime::TriggerHookPoint;
void inject_descheduling(TriggerHookPoint point) {
  if (point == TriggerHookPoint::kFiringAnnounced && t_matcher) {
    usleep(100000);
  } else if (point == TriggerHookPoint::kMatchStamped) {
    usleep(2000);
  }
}

// Sets the runtime's test hook to inject_descheduling. False if the runtime has none.
bool set_injection() {
  using Hook = std::atomic<void (*)(TriggerHookPoint)>;
  auto* hook =
      static_cast<Hook*>(dlsym(RTLD_DEFAULT, "_ZN9nanotrace7runtime19g_trigger_test_hookE"));
  if (hook == nullptr) return false;
  hook->store(inject_descheduling);
  return true;
}

void pin_to_cpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

void worker(uint64_t thread, bool matcher) {
  pin_to_cpu0();
  t_matcher = matcher;
  if (matcher && g_idle) {
    sched_param param{};
    if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) std::perror("sched_setscheduler");
  }
  uint64_t fired = 0;
  for (uint64_t seq = 0; !g_stop.load(std::memory_order_relaxed); ++seq) {
    NANOTRACE(test, trig, "thread={} seq={}", thread, seq);
    if (matcher) {
      uint64_t run = g_armed_run.load(std::memory_order_acquire);
      if (run != fired) {
        NANOTRACE(test, fire, "run={}", run);
        fired = run;
      }
    }
    // Short sleeps let the idle-priority matcher run at all; the wake-ups of the others
    // then preempt it at arbitrary points, including inside the trigger's freeze.
    if (seq % 1024 == 1023) usleep(500);
  }
}

struct RunResult {
  int64_t after = -1;
  uint64_t matched_run = 0;  // the run field of the test:fire record stamped at the match
  bool ok = false;
};

RunResult one_run(uint64_t run, uint64_t window) {
  RunResult out;
  nanotrace::TriggerWindow w;
  w.after_events = window;
  nanotrace::Status armed = nanotrace::arm_trigger("test:fire run==" + std::to_string(run), w);
  if (!armed.ok()) {
    std::fprintf(stderr, "arm: %s\n", armed.message().c_str());
    return out;
  }
  g_armed_run.store(run, std::memory_order_release);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!nanotrace::frozen()) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "run %llu: no freeze within 20 s\n", (unsigned long long)run);
      return out;
    }
    usleep(500);
  }
  auto frozen_at = std::chrono::steady_clock::now();
  auto trace = nanotrace::Trace::open_pid(getpid());
  if (!trace.ok()) {
    std::fprintf(stderr, "open: %s\n", trace.status().message().c_str());
    return out;
  }
  uint64_t match_ticks = (*trace)->process().trigger.ticks;
  auto source = (*trace)->read_all();
  nanotrace::Record r;
  int64_t after = 0;
  while (source->next(&r)) {
    after += r.ticks > match_ticks;
    if (r.ticks == match_ticks && r.event != nullptr && r.event->full_name() == "test:fire") {
      out.matched_run = r.values[0].bits;
    }
  }
  out.after = after;
  if (getenv("TRIGGER_LAG_DEBUG")) {
    auto now = std::chrono::steady_clock::now();
    std::fprintf(
        stderr, "freeze %.1f ms, read %.1f ms\n",
        std::chrono::duration<double, std::milli>(frozen_at - (deadline - std::chrono::seconds(20)))
            .count(),
        std::chrono::duration<double, std::milli>(now - frozen_at).count());
  }
  out.ok = true;
  nanotrace::Status resumed = nanotrace::resume();
  if (!resumed.ok()) std::fprintf(stderr, "resume: %s\n", resumed.message().c_str());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 50, threads = 32, window = 1000;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&] { return i + 1 < argc ? std::strtoull(argv[++i], nullptr, 10) : 0ull; };
    if (!std::strcmp(argv[i], "--runs")) {
      runs = arg();
    } else if (!std::strcmp(argv[i], "--threads")) {
      threads = arg();
    } else if (!std::strcmp(argv[i], "--window")) {
      window = arg();
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else if (!std::strcmp(argv[i], "--no-idle")) {
      g_idle = false;
    } else if (!std::strcmp(argv[i], "--inject")) {
      if (!set_injection()) {
        std::fprintf(stderr, "--inject: this runtime has no test hook\n");
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--quick")) {
      runs = 3;
    } else {
      std::fprintf(stderr,
                   "usage: trigger_lag [--runs N] [--threads T] [--window W] "
                   "[--json FILE] [--quick] [--no-idle] [--inject]\n");
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  std::vector<std::thread> pool;
  for (uint64_t t = 0; t < threads; ++t) pool.emplace_back(worker, t, t == threads - 1);
  std::vector<int64_t> excess;
  int failures = 0;
  uint64_t wrong_match = 0;  // runs whose trigger names another run's record
  auto start = std::chrono::steady_clock::now();
  for (uint64_t run = 1; run <= runs; ++run) {
    RunResult r = one_run(run, window);
    if (!r.ok) {
      ++failures;
      break;
    }
    std::printf("run %llu after %lld bound %llu match %llu\n", (unsigned long long)run,
                (long long)r.after, (unsigned long long)(window + threads),
                (unsigned long long)r.matched_run);
    if (r.matched_run != 0 && r.matched_run != run) ++wrong_match;
    std::fflush(stdout);
    excess.push_back(r.after - static_cast<int64_t>(window));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  g_stop = true;
  for (auto& t : pool) t.join();
  std::vector<int64_t> sorted = excess;
  std::sort(sorted.begin(), sorted.end());
  int64_t median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  int64_t max = sorted.empty() ? 0 : sorted.back();
  uint64_t over = std::count_if(sorted.begin(), sorted.end(),
                                [&](int64_t e) { return e > static_cast<int64_t>(threads); });
  std::printf(
      "runs %zu threads %llu window %llu: beyond the window median %lld max %lld, "
      "%llu runs over the bound, %llu naming another record, %.1f s\n",
      sorted.size(), (unsigned long long)threads, (unsigned long long)window, (long long)median,
      (long long)max, (unsigned long long)over, (unsigned long long)wrong_match, seconds);
  if (!json.empty()) {
    const char* ring = getenv("NANOTRACE_BUFFER");
    nlohmann::json out = {{"runs", sorted.size()},
                          {"threads", threads},
                          {"window", window},
                          {"ring_bytes", ring ? ring : "default"},
                          {"beyond_window_median", median},
                          {"beyond_window_max", max},
                          {"bound_beyond_window", threads},
                          {"runs_over_bound", over},
                          {"runs_naming_another_record", wrong_match},
                          {"failed_runs", failures},
                          {"seconds", seconds}};
    std::ofstream(json) << out.dump(2) << "\n";
  }
  return failures ? 1 : 0;
}
