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
//   mix N M  three threads at once: "mix-submit" begins N operations mix:op_begin (key id) and
//            mix:lock_begin (key name), "mix-complete" ends each as soon as it begun
//            (mix:op_end, mix:lock_end: every pair crosses threads), "mix-local" begins and
//            ends N of its own. With M > 0 the keys are taken modulo M, so both threads'
//            keys collide (begins replaced, ends without a begin); with M = 0 every key is new
//            and the run lasts at least 1 ms per 1,000 operations
// and prints "done" after each. Exits when stdin closes.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

void run_named(const char* name, auto&& body) {
  std::thread t([&] {
    pthread_setname_np(pthread_self(), name);  // the ring's thread name, taken at its first record
    body();
  });
  t.join();
}

// The mix command (see the top of the file): keys from `base` on, modulo m unless m is 0.
void mix(uint64_t n, uint64_t m, uint64_t base) {
  auto key = [&](uint64_t i) { return m == 0 ? base + i : i % m; };
  auto lock_name = [&](uint64_t k) { return "lock" + std::to_string(m == 0 ? k : k % 13); };
  std::vector<std::atomic<uint64_t>> begun(n);  // key + 1 once its begin is written
  std::thread submit([&] {
    pthread_setname_np(pthread_self(), "mix-submit");
    for (uint64_t i = 0; i < n; ++i) {
      NANOTRACE(mix, op_begin, "id={} len={}", key(i), uint64_t{512});
      const std::string name = lock_name(key(i));
      NANOTRACE(mix, lock_begin, "name={} id={}", name.c_str(), key(i));
      begun[i].store(key(i) + 1, std::memory_order_release);
      // New keys are for passes that cut the run: it lasts 1 ms per 1,000 operations.
      if (m == 0 && i % 1000 == 999) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::thread complete([&] {
    pthread_setname_np(pthread_self(), "mix-complete");
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t k;
      while ((k = begun[i].load(std::memory_order_acquire)) == 0) std::this_thread::yield();
      NANOTRACE(mix, op_end, "id={} status={}", k - 1, 0);
      const std::string name = lock_name(k - 1);
      NANOTRACE(mix, lock_end, "name={}", name.c_str());
    }
  });
  std::thread local([&] {
    pthread_setname_np(pthread_self(), "mix-local");
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t k = m == 0 ? base + n + i : (i * 7) % m;
      NANOTRACE(mix, op_begin, "id={} len={}", k, uint64_t{4096});
      NANOTRACE(mix, op_end, "id={} status={}", k, 1);
    }
  });
  submit.join();
  complete.join();
  local.join();
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
    } else if (line.rfind("mix ", 0) == 0) {
      char* rest = nullptr;
      n = std::strtoull(line.c_str() + 4, &rest, 10);
      const uint64_t m = std::strtoull(rest, nullptr, 10);
      static uint64_t base = 1000000;  // keys of each unique mix follow the last one's
      mix(n, m, base);
      base += 2 * n;
    } else if (line == "end") {
      run_named("ender", [&] { NANOTRACE(io, complete, "req={} status={}", stuck, 0); });
    }
    std::printf("done\n");
    std::fflush(stdout);
  }
  return 0;
}
