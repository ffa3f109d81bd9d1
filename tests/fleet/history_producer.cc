// A traced process with one idle thread and one busy one, for the agent's history figure: the
// idle thread writes one record and nothing more (it lives on); --gap-ms later (default 300) the
// main thread writes --records records (default 20000, enough to write over a 64 KiB ring many
// times), prints "ready", and holds its rings until its stdin closes. Prints "pid <pid>" at start.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/nanotrace.hpp>
#include <thread>

int main(int argc, char** argv) {
  long gap_ms = 300;
  uint64_t records = 20000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--gap-ms") == 0) gap_ms = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--records") == 0) records = std::strtoull(argv[i + 1], nullptr, 10);
  }
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  std::atomic<bool> written{false}, done{false};
  std::thread idle([&] {
    NANOTRACE(test, idle, "once={}", uint64_t{1});
    written.store(true);
    while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  while (!written.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  for (uint64_t i = 0; i < records; ++i) NANOTRACE(test, busy, "i={} pad={}", i, i * 3);
  std::printf("ready\n");
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  done.store(true);
  idle.join();
  return 0;
}
