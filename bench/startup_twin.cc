// A trivial program for the start-up benchmarks (hiccups.cc, lttng_hiccups.cc): built with one
// nanotrace tracepoint (NANOTRACE_TWIN_TRACED), with the same event as an LTTng-UST tracepoint
// (NANOTRACE_TWIN_LTTNG), and with none; they are timed against each other.
#include <cstdint>
#include <cstdio>
#ifdef NANOTRACE_TWIN_TRACED
#include <nanotrace/nanotrace.hpp>
#endif
#ifdef NANOTRACE_TWIN_LTTNG
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "lttng_twin_tp.h"
#endif

int main(int argc, char**) {
  uint64_t n = static_cast<uint64_t>(argc);
#ifdef NANOTRACE_TWIN_TRACED
  NANOTRACE(twin, hello, "n={}", n);
#endif
#ifdef NANOTRACE_TWIN_LTTNG
  lttng_ust_tracepoint(twin, hello, n);
#endif
  return n > 100 ? 1 : 0;
}
