// A trivial program for the start-up benchmark (hiccups.cc): built once with one tracepoint
// (NANOTRACE_TWIN_TRACED) and once without, the two are timed against each other.
#include <cstdint>
#include <cstdio>
#ifdef NANOTRACE_TWIN_TRACED
#include <nanotrace/nanotrace.hpp>
#endif

int main(int argc, char**) {
  uint64_t n = static_cast<uint64_t>(argc);
#ifdef NANOTRACE_TWIN_TRACED
  NANOTRACE(twin, hello, "n={}", n);
#endif
  return n > 100 ? 1 : 0;
}
