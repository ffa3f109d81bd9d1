// A traced producer for the fleet tests and benchmark: one thread writes test:io
// "req={} lat_us={}" every --period-us (default 200) with lat_us 100, until SIGTERM. Each time
// the file named by --slow appears, it writes one record with lat_us 50000 (a slow I/O) and
// removes the file (once its rings are not frozen), so that a test decides when a node's
// trigger fires. --burst N first writes
// N records at full speed (to fill large rings). Prints "pid <pid>" at start.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>

namespace {
std::atomic<bool> g_stop{false};
void on_term(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  std::string slow;
  long period_us = 200;
  uint64_t burst = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--slow") == 0) slow = argv[i + 1];
    if (std::strcmp(argv[i], "--period-us") == 0) period_us = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--burst") == 0) burst = std::strtoull(argv[i + 1], nullptr, 10);
  }
  signal(SIGTERM, on_term);
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  for (uint64_t i = 0; i < burst; ++i) NANOTRACE(test, io, "req={} lat_us={}", i, uint64_t{100});
  for (uint64_t req = burst; !g_stop.load(); ++req) {
    // Not while frozen (the previous round's copy not yet resumed): the slow record would
    // be dropped, and the test would wait for a firing that cannot come.
    if (!slow.empty() && req % 16 == 0 && !nanotrace::frozen() && access(slow.c_str(), F_OK) == 0) {
      unlink(slow.c_str());
      NANOTRACE(test, io, "req={} lat_us={}", req, uint64_t{50000});
      continue;
    }
    NANOTRACE(test, io, "req={} lat_us={}", req, uint64_t{100});
    usleep(static_cast<useconds_t>(period_us));
  }
  return 0;
}
