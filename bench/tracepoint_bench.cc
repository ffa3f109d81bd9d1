// Tracepoint cost against the physical floor (TSC read plus a 32-byte ring store), in one
// run. Two parts:
//  1. Google Benchmark functions (floor, 0/2/4-field events, a disabled event, 2 threads);
//     run them with --benchmark_enable_random_interleaving and repetitions so both sides of
//     a comparison see the same machine states.
//  2. --summary=FILE: a paired measurement that alternates short bursts of the floor and of
//     each event (A B A B ..., 20k operations a burst, hundreds of rounds) and keeps the
//     median of the per-round ratios, robust to this machine's clock changing state every
//     second or so. Writes FILE as JSON (floor_ns, event{0,2,4}_ns, disabled_ns,
//     event2_2threads_ns, ratio_event2_to_floor, ...).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>
#include <vector>

#include "floor.hpp"

namespace {

thread_local std::unique_ptr<nanotrace::FloorRing> t_floor_ring;
nanotrace::FloorRing& floor_ring() {
  if (!t_floor_ring) t_floor_ring = std::make_unique<nanotrace::FloorRing>();
  return *t_floor_ring;
}

// Each operation is a separate noinline function so the loops around them are identical.
[[gnu::noinline]] void op_floor(uint64_t i) { nanotrace::floor_step(floor_ring(), i, i * 3); }
[[gnu::noinline]] void op_event0(uint64_t) { NANOTRACE(bench, e0, ""); }
[[gnu::noinline]] void op_event2(uint64_t i) { NANOTRACE(bench, e2, "a={} b={}", i, i * 3); }
[[gnu::noinline]] void op_event4(uint64_t i) {
  NANOTRACE(bench, e4, "a={} b={} c={} d={}", i, i * 3, i + 1, i ^ 5);
}
[[gnu::noinline]] void op_disabled(uint64_t i) { NANOTRACE(benchoff, e2, "a={} b={}", i, i * 3); }
// The call and loop overhead every op above pays too: subtracted to get what a disabled
// tracepoint itself adds.
[[gnu::noinline]] void op_empty(uint64_t i) { asm volatile("" ::"r"(i)); }

template <void (*Op)(uint64_t)>
void BM(benchmark::State& state) {
  uint64_t i = 0;
  floor_ring();
  for (auto _ : state) Op(++i);
  state.SetItemsProcessed(static_cast<int64_t>(i));
}
BENCHMARK(BM<op_floor>)->Name("floor");
BENCHMARK(BM<op_event0>)->Name("event0");
BENCHMARK(BM<op_event2>)->Name("event2");
BENCHMARK(BM<op_event4>)->Name("event4");
BENCHMARK(BM<op_disabled>)->Name("disabled");
BENCHMARK(BM<op_empty>)->Name("empty_call");
BENCHMARK(BM<op_floor>)->Name("floor_2threads")->Threads(2)->UseRealTime();
BENCHMARK(BM<op_event2>)->Name("event2_2threads")->Threads(2)->UseRealTime();

// ---- paired summary ----

constexpr int kBurst = 20000;

template <void (*Op)(uint64_t)>
uint64_t burst_ticks(uint64_t& i) {
  uint64_t t0 = __rdtsc();
  for (int k = 0; k < kBurst; ++k) Op(++i);
  return __rdtsc() - t0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Paired {
  double floor_ticks;  // median ticks per floor operation
  double op_ticks;     // median ticks per measured operation
  double ratio;        // median of per-round op/floor
};

// Alternates floor and op bursts, swapping their order every round.
template <void (*Op)(uint64_t)>
Paired paired(int rounds) {
  std::vector<double> f, o, r;
  uint64_t i = 0;
  for (int w = 0; w < 20; ++w) {  // warm up both sides
    burst_ticks<op_floor>(i);
    burst_ticks<Op>(i);
  }
  for (int round = 0; round < rounds; ++round) {
    uint64_t a, b;
    if (round & 1) {
      b = burst_ticks<Op>(i);
      a = burst_ticks<op_floor>(i);
    } else {
      a = burst_ticks<op_floor>(i);
      b = burst_ticks<Op>(i);
    }
    f.push_back(static_cast<double>(a) / kBurst);
    o.push_back(static_cast<double>(b) / kBurst);
    r.push_back(static_cast<double>(b) / static_cast<double>(a));
  }
  return {median(f), median(o), median(r)};
}

double ticks_per_ns() {
  auto t0 = std::chrono::steady_clock::now();
  uint64_t c0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  uint64_t c1 = __rdtsc();
  auto t1 = std::chrono::steady_clock::now();
  return static_cast<double>(c1 - c0) /
         static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

int write_summary(const char* path, int rounds) {
  double tpn = ticks_per_ns();
  Paired e0 = paired<op_event0>(rounds);
  Paired e2 = paired<op_event2>(rounds);
  Paired e4 = paired<op_event4>(rounds);
  Paired off = paired<op_disabled>(rounds);
  Paired empty = paired<op_empty>(rounds);
  // Disabled cost net of the call both it and the empty op pay, in floor-relative terms.
  double disabled_ns = (off.op_ticks - empty.op_ticks) / tpn;
  if (disabled_ns < 0) disabled_ns = 0;
  // Two threads at once, each alternating floor and event2 bursts.
  Paired two[2];
  std::thread peer([&] { two[1] = paired<op_event2>(rounds); });
  two[0] = paired<op_event2>(rounds);
  peer.join();
  double two_ratio = (two[0].ratio + two[1].ratio) / 2;
  double two_ns = (two[0].op_ticks + two[1].op_ticks) / 2 / tpn;
  FILE* out = std::fopen(path, "w");
  if (!out) {
    std::perror(path);
    return 1;
  }
  double floor_ns = e2.floor_ticks / tpn;
  std::fprintf(out,
               "{\n"
               "  \"method\": \"paired bursts of %d ops, floor and event alternating, %d rounds, "
               "medians\",\n"
               "  \"ticks_per_ns\": %.4f,\n"
               "  \"floor_ns\": %.3f,\n"
               "  \"event0_ns\": %.3f,\n"
               "  \"event2_ns\": %.3f,\n"
               "  \"event4_ns\": %.3f,\n"
               "  \"disabled_ns\": %.3f,\n"
               "  \"disabled_call_ns\": %.3f,\n"
               "  \"empty_call_ns\": %.3f,\n"
               "  \"event2_2threads_ns\": %.3f,\n"
               "  \"ratio_event0_to_floor\": %.4f,\n"
               "  \"ratio_event2_to_floor\": %.4f,\n"
               "  \"ratio_event4_to_floor\": %.4f,\n"
               "  \"ratio_disabled_to_floor\": %.4f,\n"
               "  \"ratio_event2_2threads_to_floor\": %.4f,\n"
               "  \"event2_2threads_vs_1thread\": %.4f,\n"
               "  \"event2_record_bytes\": 24\n"
               "}\n",
               kBurst, rounds, tpn, floor_ns, e0.op_ticks / tpn, e2.op_ticks / tpn,
               e4.op_ticks / tpn, disabled_ns, off.op_ticks / tpn, empty.op_ticks / tpn, two_ns,
               e0.ratio, e2.ratio, e4.ratio, off.ratio, two_ratio, two_ratio / e2.ratio);
  std::fclose(out);
  std::printf(
      "floor %.2f ns | event0 %.2f (x%.3f) | event2 %.2f (x%.3f) | event4 %.2f (x%.3f) | "
      "disabled %.2f (net of call) | 2 threads event2 %.2f ns/thread (x%.3f)\n",
      floor_ns, e0.op_ticks / tpn, e0.ratio, e2.op_ticks / tpn, e2.ratio, e4.op_ticks / tpn,
      e4.ratio, disabled_ns, two_ns, two_ratio);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Group "benchoff" stays disabled; the ring is the default flight recorder.
  nanotrace::Options options;
  options.groups = "all,-benchoff";
  if (auto s = nanotrace::configure(options); !s.ok()) {
    std::fprintf(stderr, "configure: %s\n", s.message().c_str());
    return 1;
  }
  const char* summary = nullptr;
  int rounds = 400;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--summary=", 10)) {
      summary = argv[i] + 10;
    } else if (!std::strncmp(argv[i], "--rounds=", 9)) {
      rounds = std::atoi(argv[i] + 9);
    } else {
      args.push_back(argv[i]);
    }
  }
  if (summary) return write_summary(summary, rounds);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
