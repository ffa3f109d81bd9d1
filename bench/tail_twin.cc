// A program for lttng_hiccups.cc: the first events of 1,000 new threads and the tail of 10 M
// events on one pinned thread (tail_timing.hpp), traced by nanotrace (built with
// NANOTRACE_TWIN_TRACED) or by LTTng-UST (NANOTRACE_TWIN_LTTNG), the same fields either way;
// prints the figures as JSON. Every sample of the per-event loop is kept together, block or
// sub-buffer starts included, after a million events that filled each tracer's buffers once.
//
//   tail_twin [--quick]
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "tail_timing.hpp"
#ifdef NANOTRACE_TWIN_TRACED
#include "nanotrace_probe.hpp"
#endif
#ifdef NANOTRACE_TWIN_LTTNG
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "lttng_twin_tp.h"
#endif

namespace {

#ifdef NANOTRACE_TWIN_TRACED
// Blocks are not told apart: LTTng-UST's sub-buffer switches cannot be, so neither are ours.
struct Probe : bench::NanotraceProbe {
  void attach() {}
  uint64_t head() const { return 0; }
};
constexpr const char* kTracer = "nanotrace";
#endif

#ifdef NANOTRACE_TWIN_LTTNG
struct Probe {
  void first(uint64_t thread) { lttng_ust_tracepoint(twin, hello, thread); }
  void event(uint64_t a, uint64_t b) { lttng_ust_tracepoint(twin, ev, a, b); }
  void attach() {}
  uint64_t head() const { return 0; }
  uint64_t block = 0, ring = 0;
};
constexpr const char* kTracer = "lttng_ust";
#endif

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && !std::strcmp(argv[1], "--quick");
  if (argc > 2 || (argc == 2 && !quick)) {
    std::fprintf(stderr, "usage: tail_twin [--quick]\n");
    return 2;
  }
  const double tpn = bench::ticks_per_ns(quick ? 20 : 200);
  Probe probe;
  nlohmann::json out = {{"tracer", kTracer}, {"ticks_per_ns", tpn}};
  out["first_event"] = bench::first_events(probe, quick ? 20 : 1000, tpn);
  out["per_event"] =
      bench::per_event(probe, quick ? 20000 : 10000000, tpn, quick ? 20000 : 1000000);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
