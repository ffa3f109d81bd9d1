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
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nanotrace/nanotrace.hpp>
#include <nanotrace/reader.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "spawn_timing.hpp"

namespace {

using bench::now_ns;
using bench::percentile;
using bench::spawn_and_wait_ns;

inline uint64_t ticks() {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}

// TSC ticks per nanosecond, measured over `ms` milliseconds.
double ticks_per_ns(int ms) {
  uint64_t t0 = ticks(), n0 = now_ns();
  usleep(ms * 1000);
  uint64_t t1 = ticks(), n1 = now_ns();
  return static_cast<double>(t1 - t0) / static_cast<double>(n1 - n0);
}

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

long switches() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

long page_faults() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt + ru.ru_majflt;
}

// Every first event is kept in the figures; those during which the thread was switched out
// are also counted, and the maximum of the others given apart, so that what the runtime costs
// is told from what a loaded machine's scheduler adds. Page faults are counted per first event.
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

// A fixed amount of work (a chain of dependent multiplications): the baseline that each new
// thread also times, so the machine's own outliers (interrupts, a hypervisor taking the vCPU
// away, which no context switch count shows) are seen beside the first events'.
uint64_t spin(uint64_t rounds) {
  uint64_t x = rounds | 1;
  for (uint64_t i = 0; i < rounds; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

nlohmann::json first_events(int threads, double tpn) {
  std::vector<uint64_t> cost, not_preempted, baseline;
  std::vector<long> faults;
  // The five slowest first events, with what each one's thread saw meanwhile.
  struct Sample {
    uint64_t ticks;
    long faults, switches;
    int thread;  // the how-manieth new thread
  };
  std::vector<Sample> slowest;
  cost.reserve(threads);
  // About as long as a first event: 5 us of spinning.
  uint64_t spin_rounds = 1000;
  for (int i = 0; i < 20; ++i) {
    uint64_t t0 = ticks();
    __asm__ volatile("" : : "r"(spin(spin_rounds)));
    double us = static_cast<double>(ticks() - t0) / tpn / 1e3;
    if (us > 0) spin_rounds = std::max<uint64_t>(1, static_cast<uint64_t>(spin_rounds * 5.0 / us));
  }
  for (int i = 0; i < threads; ++i) {
    uint64_t c = 0, b = 0;
    long switched = 0, faulted = 0;
    std::thread([&, i] {
      uint64_t t0 = ticks();
      __asm__ volatile("" : : "r"(spin(spin_rounds)));
      b = ticks() - t0;
      long s0 = switches(), f0 = page_faults();
      t0 = ticks();
      NANOTRACE(hiccup, first, "thread={}", static_cast<uint64_t>(i));
      c = ticks() - t0;
      switched = switches() - s0;
      faulted = page_faults() - f0;
    }).join();
    cost.push_back(c);
    baseline.push_back(b);
    faults.push_back(faulted);
    if (switched == 0) not_preempted.push_back(c);
    slowest.push_back({c, faulted, switched, i});
    std::sort(slowest.begin(), slowest.end(),
              [](const Sample& x, const Sample& y) { return x.ticks > y.ticks; });
    if (slowest.size() > 5) slowest.pop_back();
  }
  nlohmann::json slow = nlohmann::json::array();
  for (const Sample& x : slowest) {
    slow.push_back({{"ns", static_cast<double>(x.ticks) / tpn},
                    {"page_faults", x.faults},
                    {"switches", x.switches},
                    {"thread", x.thread}});
  }
  auto ns = [&](const std::vector<uint64_t>& v, double p) {
    return static_cast<double>(percentile(v, p)) / tpn;
  };
  return {{"threads", threads},
          {"median_ticks", percentile(cost, 50)},
          {"median_ns", ns(cost, 50)},
          {"p99_ns", ns(cost, 99)},
          {"max_ns", ns(cost, 100)},
          {"preempted", cost.size() - not_preempted.size()},
          {"not_preempted_median_ns", ns(not_preempted, 50)},
          {"not_preempted_p99_ns", ns(not_preempted, 99)},
          {"not_preempted_max_ns", ns(not_preempted, 100)},
          {"baseline_5us_spin_same_threads",
           {{"median_ns", ns(baseline, 50)},
            {"p99_ns", ns(baseline, 99)},
            {"max_ns", ns(baseline, 100)}}},
          {"slowest", slow},
          {"page_faults_median", percentile(faults, 50)},
          {"page_faults_max", percentile(faults, 100)},
          {"target_median_ns", 10000},
          {"target_max_ns", 50000}};
}

void pin_to_last_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(std::max(0L, sysconf(_SC_NPROCESSORS_ONLN) - 1), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

nlohmann::json per_event(uint64_t samples, double tpn) {
  nlohmann::json out;
  std::thread([&] {
    pin_to_last_cpu();
    NANOTRACE(hiccup, ev, "a={} b={}", uint64_t{0}, uint64_t{0});  // claim the ring first
    auto trace = nanotrace::Trace::open_pid(getpid());
    uint64_t block = trace.ok() ? (*trace)->process().block_size : 0;
    uint64_t ring = trace.ok() ? (*trace)->process().ring_size : 0;
    const nanotrace::abi::ThreadSlot* slot = nanotrace::detail::t_writer.slot;
    const uint32_t kBatch = 1000;
    std::vector<uint64_t> normal, block_start, block_start_first_lap, first_lap, floor;
    // Each normal sample over its batch's median: a batch lasts tens of microseconds, within
    // one of the machine's speed states (they flip about every second, 1.7x apart), so this
    // tail is the runtime's own, not that of the machine's speed.
    std::vector<double> relative, floor_relative;
    std::vector<uint64_t> batch_normal;
    // Every sample vector's memory is faulted in before the first batch: a page fault taken
    // between batches (a trip through the hypervisor here) would leave the next events a cold
    // TLB and cache, a tail of the benchmark's own making.
    auto prefault = [](auto& v, size_t n) {
      v.resize(n);
      v.clear();
    };
    prefault(normal, samples);
    prefault(relative, samples);
    prefault(floor_relative, samples);
    prefault(floor, samples / kBatch * 64 + 64);
    prefault(block_start, samples / 64);
    prefault(first_lap, samples / 64);
    prefault(batch_normal, kBatch);
    // A sample over 1 us was interrupted (an interrupt or the hypervisor taking the CPU
    // without a context switch in the guest): the fast path has nothing that takes that long.
    // Such samples are counted for the events and for the empty timer alike, and the tail is
    // also given without them.
    const auto interrupted = static_cast<uint64_t>(tpn * 1000);
    uint64_t interrupted_events = 0, interrupted_empty = 0;
    std::vector<double> relative_uninterrupted;
    prefault(relative_uninterrupted, samples);
    uint64_t discarded = 0, kept = 0;
    std::vector<uint64_t> cost(kBatch), head_before(kBatch), head_after(kBatch), empty(kBatch);
    while (kept < samples) {
      long s0 = switches();
      for (uint32_t i = 0; i < kBatch; ++i) {
        // The same timer around nothing, interleaved: the tail the machine gives any code.
        uint64_t e0 = ticks();
        uint64_t e1 = ticks();
        empty[i] = e1 - e0;
        head_before[i] = __atomic_load_n(&slot->head, __ATOMIC_RELAXED);
        uint64_t t0 = ticks();
        NANOTRACE(hiccup, ev, "a={} b={}", uint64_t{i}, kept);
        uint64_t t1 = ticks();
        cost[i] = t1 - t0;
        head_after[i] = __atomic_load_n(&slot->head, __ATOMIC_RELAXED);
      }
      for (uint32_t i = 0; i < 64; ++i) {
        uint64_t t0 = ticks();
        uint64_t t1 = ticks();
        floor.push_back(t1 - t0);
      }
      if (switches() != s0) {
        discarded += kBatch;
        continue;
      }
      batch_normal.clear();
      for (uint32_t i = 0; i < kBatch; ++i) {
        // The record landed in a new block when its end is in a later block than the head
        // before it (or the head jumped past padding to the next block).
        bool starts_block =
            block && (head_after[i] - 1) / block !=
                         (head_before[i] ? (head_before[i] - 1) / block : ~uint64_t{0});
        bool in_first_lap = ring && head_after[i] <= ring;
        if (starts_block) {
          (in_first_lap ? block_start_first_lap : block_start).push_back(cost[i]);
        } else if (in_first_lap) {
          first_lap.push_back(cost[i]);
        } else {
          normal.push_back(cost[i]);
          batch_normal.push_back(cost[i]);
        }
      }
      if (uint64_t median = percentile(batch_normal, 50); median != 0) {
        for (uint64_t c : batch_normal) {
          relative.push_back(static_cast<double>(c) / median);
          if (c > interrupted) {
            ++interrupted_events;
          } else {
            relative_uninterrupted.push_back(static_cast<double>(c) / median);
          }
        }
      }
      if (uint64_t median = percentile(empty, 50); median != 0) {
        for (uint64_t c : empty) {
          floor_relative.push_back(static_cast<double>(c) / median);
          if (c > interrupted) ++interrupted_empty;
        }
      }
      kept += kBatch;
    }
    auto ns = [&](const std::vector<uint64_t>& v, double p) {
      return static_cast<double>(percentile(v, p)) / tpn;
    };
    out = {{"samples", kept},
           {"discarded_preempted", discarded},
           {"method",
            "rdtsc (lfence) around each call, thread pinned to one CPU, batches of 1000 with a "
            "context switch (getrusage RUSAGE_THREAD) discarded; block starts and first-lap "
            "samples apart"},
           {"rdtsc_pair_floor_ns", ns(floor, 50)},
           {"normal",
            {{"count", normal.size()},
             {"p50_ns", ns(normal, 50)},
             {"p99_ns", ns(normal, 99)},
             {"p99_9_ns", ns(normal, 99.9)},
             {"p99_99_ns", ns(normal, 99.99)},
             {"p99_999_ns", ns(normal, 99.999)},
             {"max_ns", ns(normal, 100)}}},
           {"normal_over_batch_median",
            {{"p99", percentile(relative, 99)},
             {"p99_9", percentile(relative, 99.9)},
             {"p99_99", percentile(relative, 99.99)},
             {"p99_999", percentile(relative, 99.999)},
             {"target_p99_99", 2.0}}},
           {"interrupted_over_1us",
            {{"events_per_million",
              1e6 * static_cast<double>(interrupted_events) / std::max<size_t>(1, relative.size())},
             {"empty_timer_per_million", 1e6 * static_cast<double>(interrupted_empty) /
                                             std::max<size_t>(1, floor_relative.size())},
             {"note",
              "a sample's chance of being interrupted grows with its length: the event's "
              "window is about twice the empty timer's"}}},
           {"uninterrupted_over_batch_median",
            {{"p99_9", percentile(relative_uninterrupted, 99.9)},
             {"p99_99", percentile(relative_uninterrupted, 99.99)},
             {"p99_999", percentile(relative_uninterrupted, 99.999)},
             {"target_p99_99", 2.0}}},
           {"empty_timer_over_batch_median",
            {{"p99", percentile(floor_relative, 99)},
             {"p99_9", percentile(floor_relative, 99.9)},
             {"p99_99", percentile(floor_relative, 99.99)},
             {"p99_999", percentile(floor_relative, 99.999)}}},
           {"first_lap",
            {{"count", first_lap.size()},
             {"p50_ns", ns(first_lap, 50)},
             {"p99_ns", ns(first_lap, 99)},
             {"max_ns", ns(first_lap, 100)}}},
           {"block_start",
            {{"count", block_start.size()},
             {"p50_ns", ns(block_start, 50)},
             {"p99_ns", ns(block_start, 99)},
             {"max_ns", ns(block_start, 100)},
             {"slow_path_ns", ns(block_start, 50) - ns(normal, 50)},
             {"target_slow_path_ns", 200}}},
           {"block_start_first_lap",
            {{"count", block_start_first_lap.size()},
             {"p50_ns", ns(block_start_first_lap, 50)},
             {"max_ns", ns(block_start_first_lap, 100)}}},
           {"block_bytes", block},
           {"ring_bytes", ring}};
  }).join();
  return out;
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
  double tpn = ticks_per_ns(quick ? 20 : 200);
  nlohmann::json out = {{"ticks_per_ns", tpn}, {"quick", quick}};
  auto wanted = [&](const char* part) { return only.empty() || only == part; };
  if (wanted("startup")) out["startup"] = startup(dir, quick ? 3 : 100);
  if (wanted("first_event")) out["first_event"] = first_events(quick ? 20 : 1000, tpn);
  if (wanted("per_event")) out["per_event"] = per_event(quick ? 20000 : 10000000, tpn);
  if (wanted("exit")) out["exit"] = exits(dir, quick ? 2 : 20);
  out["lttng_ust"] =
      "start-up with and without a session: bench/lttng_startup.cc (build/bench/"
      "lttng-startup.json); its event cost: docs/performance.md; first event and tail: not "
      "measured";
  std::string text = out.dump(2);
  std::printf("%s\n", text.c_str());
  if (!json.empty()) std::ofstream(json) << text << "\n";
  return 0;
}
