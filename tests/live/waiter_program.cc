// Test program for the live view: a traced program with operations that complete and one
// that never does (a waiter), driven by lines on stdin.
//
//   waiter_program [--stuck KEY] [--stuck-text TEXT]
//
// Prints "pid <pid>", then begins operation KEY (io:submit req=KEY, default 424242) on a
// thread named "stuck-worker" and never ends it (--stuck-text: also a begin of the string
// key TEXT of dev:lock_begin/dev:lock_end, never ended), then prints "ready". Commands, one a line:
//   ops N    N operations io:submit/io:complete on the thread "ops-worker" (one every ~100 us)
//   flood N  N records noise:tick on the thread "flood", as fast as it can: with a small
//            ring (NANOTRACE_BUFFER) they wrap it
//   end      ends the stuck operation
// and prints "done" after each. Exits when stdin closes.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>

namespace {

void run_named(const char* name, auto&& body) {
  std::thread t([&] {
    pthread_setname_np(pthread_self(), name);  // the ring's thread name, taken at its first record
    body();
  });
  t.join();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t stuck = 424242;
  std::string stuck_text;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--stuck") == 0) stuck = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--stuck-text") == 0) stuck_text = argv[i + 1];
  }
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  run_named("stuck-worker", [&] {
    // One operation of each kind that completes first: an event exists once it was written.
    NANOTRACE(io, submit, "req={} len={} path={}", uint64_t{0}, uint64_t{1}, "/data/warm");
    NANOTRACE(io, complete, "req={} status={}", uint64_t{0}, 0);
    NANOTRACE(dev, lock_begin, "name={} flags={}", "warm", 2);
    NANOTRACE(dev, lock_end, "name={}", "warm");
    NANOTRACE(io, submit, "req={} len={} path={}", stuck, uint64_t{4096}, "/data/stuck");
    if (!stuck_text.empty()) NANOTRACE(dev, lock_begin, "name={} flags={}", stuck_text.c_str(), 2);
  });
  std::printf("ready\n");
  std::fflush(stdout);
  uint64_t next_req = 1;
  std::string line;
  while (std::getline(std::cin, line)) {
    uint64_t n = 0;
    if (line.rfind("ops ", 0) == 0) {
      n = std::strtoull(line.c_str() + 4, nullptr, 10);
      run_named("ops-worker", [&] {
        for (uint64_t i = 0; i < n; ++i, ++next_req) {
          NANOTRACE(io, submit, "req={} len={} path={}", next_req, uint64_t{512}, "/data/a");
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          NANOTRACE(io, complete, "req={} status={}", next_req, 0);
        }
      });
    } else if (line.rfind("flood ", 0) == 0) {
      n = std::strtoull(line.c_str() + 6, nullptr, 10);
      run_named("flood", [&] {
        for (uint64_t i = 0; i < n; ++i) NANOTRACE(noise, tick, "n={}", i);
      });
    } else if (line == "end") {
      run_named("ender", [&] { NANOTRACE(io, complete, "req={} status={}", stuck, 0); });
    }
    std::printf("done\n");
    std::fflush(stdout);
  }
  return 0;
}
