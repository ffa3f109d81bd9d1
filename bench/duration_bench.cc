// Duration triggers' figures, in one process that traces its own pairs (bench:begin and
// bench:end by req) and reads its own segment header:
//   slow   from a slow pair's end record (the clock just before it is written) to the freeze
//          (the header's frozen_ticks): the pairing runs on that record, so the freeze is done
//          when the tracepoint returns. p50, p99, max over --reps runs.
//   stuck  how late a stuck operation is named: its age when the trigger fired minus the
//          threshold, 100 runs each: alone, with a CPU hog on every core (nice 0), and while
//          another thread writes a pair every 100 us (whose writers may name it first).
//   flow   the pairing's CPU while 2 M pairs/s flow (bursts of 2,000 pairs each millisecond,
//          64 operations in flight): the process's CPU (program and control thread, from
//          getrusage) with the stuck trigger armed on these events, against the same flow
//          with a record trigger armed on an event that never occurs; rounds of 0.5 s
//          interleaved A B A B, medians.
//   idle   the same two, no events: the control thread's aging alone.
//   cost   ns per event, bursts interleaved: events no trigger names (bench:other) with the
//          duration trigger armed against none armed (the 2 % rule), and the named events
//          (a begin and an end) with it armed against none.
// Prints one JSON document (--json FILE also writes it).
//   duration_bench [--quick] [--json FILE]
//   duration_bench --stuck REPS [--samples]   the stuck lateness alone (nothing else
//                                       flowing), REPS runs; --samples: each one's, with the
//                                       control thread's run delay (samples_ms: late, run
//                                       delay from the deadline, from the begin, its CPU and
//                                       runs from the deadline, how late the bench looked)
//   duration_bench --stuck-flowing REPS [--samples]   the same while another thread writes a
//                                       pair every 100 us
//   duration_bench --workload SECONDS   2 M pairs/s for SECONDS with one pair of 10 ms in the
//                                       middle, no trigger (for `record` then `latency`)
//   duration_bench --named-loop N       N pairs with the trigger armed, nothing else (for a
//                                       profiler)
//   duration_bench --flow ROUNDS        the flow's CPU alone, ROUNDS of 0.5 s a side (for
//                                       comparing builds: run two binaries in turn)
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nanotrace/abi.hpp>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using nlohmann::json;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void spin_ns(uint64_t ns) {
  const uint64_t until = now_ns() + ns;
  while (now_ns() < until) {
  }
}

// This process's segment header, mapped read-only.
const nanotrace::abi::SegmentHeader* header() {
  static const nanotrace::abi::SegmentHeader* h = [] {
    NANOTRACE(bench, other, "n={}", uint64_t{0});  // creates the segment
    const std::string path = "/dev/shm/nanotrace-" + std::to_string(getpid());
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      std::perror(path.c_str());
      std::exit(1);
    }
    void* p = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) std::exit(1);
    return static_cast<const nanotrace::abi::SegmentHeader*>(p);
  }();
  return h;
}

double ticks_to_ns(int64_t ticks) {
  const uint64_t tps = __atomic_load_n(&header()->ticks_per_second, __ATOMIC_RELAXED);
  return static_cast<double>(ticks) * 1e9 / static_cast<double>(tps == 0 ? 1000000000 : tps);
}

uint64_t ticks() { return header()->clock_kind == 0 ? __rdtsc() : now_ns(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100 * static_cast<double>(v.size())))];
}

json summary(const std::vector<double>& v) {
  return {{"n", v.size()},
          {"p50", percentile(v, 50)},
          {"p99", percentile(v, 99)},
          {"max", v.empty() ? 0 : *std::max_element(v.begin(), v.end())}};
}

void arm(const std::string& expression) {
  nanotrace::Status s = nanotrace::arm_trigger(expression);
  if (!s.ok()) {
    std::fprintf(stderr, "arm %s: %s\n", expression.c_str(), s.message().c_str());
    std::exit(1);
  }
}

// From a slow pair's end record to the freeze, in ns.
json slow_latency(int reps) {
  arm("bench:begin..bench:end by req > 50us");
  std::vector<double> ns;
  for (int i = 0; i < reps; ++i) {
    NANOTRACE(bench, begin, "req={}", uint64_t(i));
    spin_ns(100000);
    const uint64_t before = ticks();
    NANOTRACE(bench, end, "req={}", uint64_t(i));
    if (!nanotrace::frozen()) continue;  // counted as a miss below
    ns.push_back(ticks_to_ns(
        static_cast<int64_t>(__atomic_load_n(&header()->frozen_ticks, __ATOMIC_RELAXED) - before)));
    (void)nanotrace::resume();
  }
  (void)nanotrace::disarm_trigger();
  json out = summary(ns);
  out["missed"] = reps - static_cast<int>(ns.size());
  return out;
}

// Starts a CPU hog on every core (children at nice 0); returns their pids.
std::vector<pid_t> start_hogs() {
  std::vector<pid_t> pids;
  for (long i = 0; i < sysconf(_SC_NPROCESSORS_ONLN); ++i) {
    pid_t p = fork();
    if (p == 0) {
      for (;;) asm volatile("" ::: "memory");
    }
    pids.push_back(p);
  }
  return pids;
}

void stop_hogs(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
}

// This process's control thread (nanotrace-ctl), from its schedstat: the CPU time it ran and
// the time it waited runnable for a CPU (run delay), in ns.
struct ControlThreadTimes {
  double cpu_ns = 0;
  double run_delay_ns = 0;
  double runs = 0;  // times it was given a CPU
};
ControlThreadTimes control_thread_times() {
  ControlThreadTimes out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* d = readdir(dir)) {
    if (d->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + d->d_name;
    std::ifstream comm(task + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name != "nanotrace-ctl") continue;
    std::ifstream stat(task + "/schedstat");
    stat >> out.cpu_ns >> out.run_delay_ns >> out.runs;
  }
  closedir(dir);
  return out;
}
double control_thread_cpu_ns() { return control_thread_times().cpu_ns; }

// How late each stuck operation is named past its threshold, in ns. flowing: another thread
// writes a pair every 100 us meanwhile (its writers may name the stuck one). samples: each
// operation's lateness beside the time the control thread waited for a CPU meanwhile (its
// run delay from the first look past the deadline to the freeze), in ms, so that a tail can
// be told apart: the scheduler's (the control thread runnable and waiting) or the aging's
// (it was not).
json stuck_lateness(int reps, uint64_t threshold_ms, bool flowing = false, bool samples = false) {
  std::atomic<bool> stop{false};
  std::thread flow_thread;
  if (flowing) {
    flow_thread = std::thread([&stop] {
      for (uint64_t req = 2000000000; !stop.load(std::memory_order_relaxed); ++req) {
        NANOTRACE(bench, begin, "req={}", req);
        NANOTRACE(bench, end, "req={}", req);
        timespec ts{0, 100000};
        nanosleep(&ts, nullptr);
      }
    });
  }
  arm("bench:begin..bench:end by req open > " + std::to_string(threshold_ms) + "ms");
  std::vector<double> late;
  json each = json::array();
  int missed = 0;
  for (int i = 0; i < reps; ++i) {
    const uint64_t req = 1000000 + static_cast<uint64_t>(i);
    const ControlThreadTimes at_begin = samples ? control_thread_times() : ControlThreadTimes{};
    ControlThreadTimes at_due = at_begin;
    NANOTRACE(bench, begin, "req={}", req);
    const uint64_t due = now_ns() + threshold_ms * 1000000;
    uint64_t due_seen_ns = due;
    bool due_seen = !samples;
    const uint64_t deadline = now_ns() + threshold_ms * 1000000 * 4 + 500000000;
    while (!nanotrace::frozen() && now_ns() < deadline) {
      if (!due_seen && now_ns() >= due) {
        due_seen = true;
        due_seen_ns = now_ns();
        at_due = control_thread_times();
        continue;
      }
      timespec ts{0, 200000};
      nanosleep(&ts, nullptr);
    }
    if (!nanotrace::frozen()) {
      ++missed;
    } else {
      const auto& d = header()->duration;
      const int64_t age =
          static_cast<int64_t>(__atomic_load_n(&d.duration_ticks, __ATOMIC_RELAXED));
      late.push_back(ticks_to_ns(age) - static_cast<double>(threshold_ms) * 1e6);
      if (samples) {
        // ms: late; the control thread's run delay from the due look, and from the begin; its
        // CPU and its runs from the due look; how late the bench looked past the deadline.
        const ControlThreadTimes at_end = control_thread_times();
        each.push_back({late.back() / 1e6, (at_end.run_delay_ns - at_due.run_delay_ns) / 1e6,
                        (at_end.run_delay_ns - at_begin.run_delay_ns) / 1e6,
                        (at_end.cpu_ns - at_due.cpu_ns) / 1e6, at_end.runs - at_due.runs,
                        static_cast<double>(due_seen_ns - due) / 1e6});
      }
      (void)nanotrace::resume();
    }
    NANOTRACE(bench, end, "req={}", req);  // after the resume: an end without a begin
  }
  (void)nanotrace::disarm_trigger();
  stop.store(true);
  if (flow_thread.joinable()) flow_thread.join();
  json out = summary(late);
  out["missed"] = missed;
  out["threshold_ms"] = threshold_ms;
  out["over_5ms"] = std::count_if(late.begin(), late.end(), [](double ns) { return ns > 5e6; });
  if (samples) out["samples_ms"] = each;
  return out;
}

// 2 M pairs/s for `seconds`: bursts of 2,000 pairs each millisecond, 64 operations in flight.
// Returns the pairs written.
uint64_t flow(double seconds, uint64_t* next_req, uint64_t slow_at_ns = 0) {
  const uint64_t start = now_ns();
  const uint64_t end = start + static_cast<uint64_t>(seconds * 1e9);
  uint64_t pairs = 0;
  for (uint64_t tick = start; tick < end; tick += 1000000) {
    for (int i = 0; i < 2000; ++i) {
      const uint64_t req = (*next_req)++;
      NANOTRACE(bench, begin, "req={}", req);
      if (req >= 64) NANOTRACE(bench, end, "req={}", req - 64);
    }
    pairs += 2000;
    if (slow_at_ns != 0 && tick >= start + slow_at_ns) {
      NANOTRACE(bench, begin, "req={}", uint64_t{~0ull});
      spin_ns(10000000);
      NANOTRACE(bench, end, "req={}", uint64_t{~0ull});
      slow_at_ns = 0;
    }
    const uint64_t now = now_ns();
    if (now < tick + 1000000) {
      timespec ts{0, static_cast<long>(tick + 1000000 - now)};
      nanosleep(&ts, nullptr);
    }
  }
  return pairs;
}

// CPU % of one core over rounds, A (a record trigger on an event that never occurs) and B
// (the stuck trigger on the flowing pairs) interleaved.
json flow_cpu(int rounds, double round_s, bool events) {
  std::vector<double> a, b, rates, control_a, control_b;
  uint64_t req = 0;
  for (int r = 0; r < 2 * rounds; ++r) {
    const bool duration = r % 2 == 1;
    arm(duration ? "bench:begin..bench:end by req open > 50ms" : "bench:never n==1");
    const double c0 = cpu_seconds();
    const double control0 = control_thread_cpu_ns();
    const uint64_t t0 = now_ns();
    uint64_t pairs = 0;
    if (events) {
      pairs = flow(round_s, &req);
    } else {
      timespec ts{static_cast<time_t>(round_s),
                  static_cast<long>((round_s - static_cast<long>(round_s)) * 1e9)};
      nanosleep(&ts, nullptr);
    }
    const double wall = static_cast<double>(now_ns() - t0) / 1e9;
    const double pct = (cpu_seconds() - c0) / wall * 100;
    (duration ? b : a).push_back(pct);
    (duration ? control_b : control_a)
        .push_back((control_thread_cpu_ns() - control0) / 1e9 / wall * 100);
    if (events) rates.push_back(static_cast<double>(pairs) / wall);
    (void)nanotrace::disarm_trigger();
    // The operations left open are forgotten with the trigger; the next round starts clean.
    for (uint64_t k = req >= 64 ? req - 64 : 0; k < req; ++k) NANOTRACE(bench, end, "req={}", k);
  }
  json out = {{"a_cpu_pct_median", percentile(a, 50)},
              {"b_cpu_pct_median", percentile(b, 50)},
              {"pairing_cpu_pct", percentile(b, 50) - percentile(a, 50)},
              {"control_thread_cpu_pct_a", percentile(control_a, 50)},
              {"control_thread_cpu_pct_b", percentile(control_b, 50)},
              {"a_rounds", a},
              {"b_rounds", b}};
  if (events) out["pairs_per_s_median"] = percentile(rates, 50);
  NANOTRACE(bench, never, "n={}", uint64_t{0});
  return out;
}

// This thread's CPU time in ns: a burst's cost without the time other processes took the
// CPU from it (the machine is shared).
uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ns of CPU per event in bursts, A (nothing armed) and B (the duration trigger armed)
// interleaved.
json event_cost(int rounds, bool named) {
  std::vector<double> a, b;
  const uint64_t n = 200000;
  uint64_t req = 0;
  for (int r = 0; r < 2 * rounds; ++r) {
    const bool duration = r % 2 == 1;
    if (duration) arm("bench:begin..bench:end by req > 1s");
    const uint64_t t0 = thread_cpu_ns();
    if (named) {
      for (uint64_t i = 0; i < n / 2; ++i, ++req) {
        NANOTRACE(bench, begin, "req={}", req);
        NANOTRACE(bench, end, "req={}", req);
      }
    } else {
      for (uint64_t i = 0; i < n; ++i) NANOTRACE(bench, other, "n={}", i);
    }
    (duration ? b : a)
        .push_back(static_cast<double>(thread_cpu_ns() - t0) / static_cast<double>(n));
    if (duration) (void)nanotrace::disarm_trigger();
  }
  const double ma = percentile(a, 50), mb = percentile(b, 50);
  return {
      {"none_armed_ns", ma}, {"duration_armed_ns", mb}, {"ratio", mb / ma}, {"extra_ns", mb - ma}};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
    if (std::strcmp(argv[i], "--named-loop") == 0 && i + 1 < argc) {  // for a profiler
      arm("bench:begin..bench:end by req > 1s");
      const auto n = std::strtoull(argv[++i], nullptr, 10);
      for (uint64_t req = 0; req < n; ++req) {
        NANOTRACE(bench, begin, "req={}", req);
        NANOTRACE(bench, end, "req={}", req);
      }
      return 0;
    }
    if ((std::strcmp(argv[i], "--stuck") == 0 || std::strcmp(argv[i], "--stuck-flowing") == 0) &&
        i + 1 < argc) {  // stuck lateness alone, or among flowing operations
      const bool flowing = std::strcmp(argv[i], "--stuck-flowing") == 0;
      const int reps = std::atoi(argv[++i]);
      const bool samples = i + 1 < argc && std::strcmp(argv[i + 1], "--samples") == 0;
      (void)header();
      std::printf("%s\n", stuck_lateness(reps, 20, flowing, samples).dump().c_str());
      return 0;
    }
    if (std::strcmp(argv[i], "--flow") == 0 && i + 1 < argc) {
      const int rounds = std::atoi(argv[++i]);
      (void)header();
      std::printf("%s\n", flow_cpu(rounds, 0.5, true).dump().c_str());
      return 0;
    }
    if (std::strcmp(argv[i], "--workload") == 0 && i + 1 < argc) {
      const double seconds = std::strtod(argv[++i], nullptr);
      uint64_t req = 0;
      const uint64_t pairs = flow(seconds, &req, static_cast<uint64_t>(seconds / 2 * 1e9));
      std::printf("{\"pairs\": %llu, \"cpu_s\": %.3f}\n", static_cast<unsigned long long>(pairs),
                  cpu_seconds());
      return 0;
    }
  }
  (void)header();
  json out;
  out["slow_end_to_freeze_ns"] = slow_latency(quick ? 50 : 2000);
  out["stuck_late_ns_quiet"] = stuck_lateness(quick ? 5 : 100, 20);
  out["stuck_late_ns_flowing"] = stuck_lateness(quick ? 5 : 100, 20, true);
  {
    std::vector<pid_t> hogs = start_hogs();
    out["stuck_late_ns_hog"] = stuck_lateness(quick ? 5 : 100, 20);
    stop_hogs(hogs);
  }
  out["flow_2m_pairs"] = flow_cpu(quick ? 2 : 10, quick ? 0.2 : 0.5, true);
  out["idle"] = flow_cpu(quick ? 2 : 6, quick ? 0.2 : 1.0, false);
  out["unnamed_event_cost"] = event_cost(quick ? 4 : 30, false);
  out["named_event_cost"] = event_cost(quick ? 4 : 30, true);
  const std::string text = out.dump(1);
  std::printf("%s\n", text.c_str());
  if (!json_path.empty()) std::ofstream(json_path) << text << "\n";
  return 0;
}
