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
//            keys collide (begins replaced, ends without a begin); with M = 0 every key is new,
//            the run lasts at least 1 ms per 1,000 operations, and after every 10,000 it waits
//            until the program has had two SIGUSR1 (the test sends one after each pass of its
//            view), so that whole passes cut the run however slowly they go
// and prints "done" after each. Exits when stdin closes.
#include <pthread.h>
#include <signal.h>
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

std::atomic<uint64_t> g_passes_seen{0};  // SIGUSR1s: passes the test's view has finished

void on_pass_signal(int) { g_passes_seen.fetch_add(1, std::memory_order_relaxed); }

// Waits until two more passes have finished: the second began after this call. Gives up after
// 30 s, so that a test that sends no signal fails on its own checks rather than hangs.
void wait_for_a_whole_pass() {
  const uint64_t want = g_passes_seen.load() + 2;
  for (int waited_ms = 0; g_passes_seen.load() < want && waited_ms < 30000; ++waited_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

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
      if (m == 0 && i % 10000 == 9999 && i + 1 < n) wait_for_a_whole_pass();
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
  struct sigaction pass_signal = {};
  pass_signal.sa_handler = on_pass_signal;
  pass_signal.sa_flags = SA_RESTART;  // stdin's read goes on across a signal
  sigaction(SIGUSR1, &pass_signal, nullptr);
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
