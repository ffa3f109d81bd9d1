// A traced producer for the fleet tests: one thread writes test:io "req={} lat_us={}" every
// 200 us with lat_us 100, until stdin closes or SIGTERM. Each time the file named by --slow
// appears, it writes one record with lat_us 50000 (a slow I/O) and removes the file, so that a
// test decides when a node's trigger fires. Prints "pid <pid>" at start.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <nanotrace/nanotrace.hpp>
#include <string>

namespace {
std::atomic<bool> g_stop{false};
void on_term(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  std::string slow;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--slow") == 0) slow = argv[i + 1];
  }
  signal(SIGTERM, on_term);
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  for (uint64_t req = 0; !g_stop.load(); ++req) {
    if (!slow.empty() && req % 16 == 0 && access(slow.c_str(), F_OK) == 0) {
      unlink(slow.c_str());
      NANOTRACE(test, io, "req={} lat_us={}", req, uint64_t{50000});
      continue;
    }
    NANOTRACE(test, io, "req={} lat_us={}", req, uint64_t{100});
    usleep(200);
  }
  return 0;
}
