// A program for the exit benchmark (hiccups.cc): records 100,000 events (or none, built
// without NANOTRACE_TWIN_TRACED), says "ready", waits for a line on stdin, then prints the
// CLOCK_MONOTONIC time at which it returns from main; the parent times from there to reaping it.
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#ifdef NANOTRACE_TWIN_TRACED
#include <nanotrace/nanotrace.hpp>
#endif

int main() {
  for (uint64_t i = 0; i < 100000; ++i) {
#ifdef NANOTRACE_TWIN_TRACED
    NANOTRACE(twin, work, "i={}", i);
#else
    __asm__ volatile("" : : "r"(i));
#endif
  }
  std::printf("ready\n");
  std::fflush(stdout);
  char line[8];
  if (std::fgets(line, sizeof(line), stdin) == nullptr) return 1;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  std::printf("%llu\n", static_cast<unsigned long long>(ts.tv_sec) * 1000000000ull +
                            static_cast<unsigned long long>(ts.tv_nsec));
  std::fflush(stdout);
  return 0;
}
