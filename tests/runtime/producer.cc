// Test producer: a traced program whose records carry their own sequence number and a
// checksum, so tests can prove the reader returns every record it claims intact.
//
//   producer --threads T --events N [--together] [--forever] [--churn K] [--spawn K --alive A]
//            [--hold] [--go]
//
// Each of T threads writes N records test:rec{thread, seq, value, check} (or until stdin
// closes with --forever, then prints "attempted <thread> <records>" per thread).
// --together: the T threads wait for each other before their first record, so that their
// first events (slot claims) race.
// --churn K: K short-lived threads write 3 records each instead.
// --spawn K: K short-lived threads, at most A (default 2) alive at a time, each writing N
// test:rec records numbered by its index.
// --pace MS: each thread sleeps MS milliseconds after each record (an idle thread).
// --hold: after producing, print "ready" and wait until stdin closes before exiting.
// --crash: after producing, die of SIGSEGV.
// --go: wait for a line on stdin before producing (lets a test attach as consumer first).
// Prints "pid <pid>" first.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <nanotrace/nanotrace.hpp>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};
uint64_t g_pace_ms = 0;

uint64_t checksum(uint64_t thread, uint64_t seq, uint64_t value) {
  uint64_t x = thread * 0x9e3779b97f4a7c15ull ^ seq * 0xbf58476d1ce4e5b9ull ^ value;
  x ^= x >> 31;
  return x * 0x94d049bb133111ebull;
}

uint64_t produce(uint64_t thread, uint64_t events, bool forever) {
  uint64_t seq = 0;
  for (; forever ? !g_stop.load(std::memory_order_relaxed) : seq < events; ++seq) {
    uint64_t value = seq * 7 + thread;
    NANOTRACE(test, rec, "thread={} seq={} value={} check={}", thread, seq, value,
              checksum(thread, seq, value));
    if (g_pace_ms != 0) std::this_thread::sleep_for(std::chrono::milliseconds(g_pace_ms));
  }
  return seq;
}

void wait_stdin_closed() {
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t threads = 1, events = 1000, churn = 0, spawn = 0, alive = 2;
  bool forever = false, hold = false, go = false, crash = false, together = false;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&] { return i + 1 < argc ? std::strtoull(argv[++i], nullptr, 10) : 0ull; };
    if (!std::strcmp(argv[i], "--threads"))
      threads = arg();
    else if (!std::strcmp(argv[i], "--events"))
      events = arg();
    else if (!std::strcmp(argv[i], "--churn"))
      churn = arg();
    else if (!std::strcmp(argv[i], "--spawn"))
      spawn = arg();
    else if (!std::strcmp(argv[i], "--alive"))
      alive = arg();
    else if (!std::strcmp(argv[i], "--pace"))
      g_pace_ms = arg();
    else if (!std::strcmp(argv[i], "--forever"))
      forever = true;
    else if (!std::strcmp(argv[i], "--hold"))
      hold = true;
    else if (!std::strcmp(argv[i], "--go"))
      go = true;
    else if (!std::strcmp(argv[i], "--crash"))
      crash = true;
    else if (!std::strcmp(argv[i], "--together"))
      together = true;
    else
      return 2;
  }
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  if (go) {
    char c;
    while (read(0, &c, 1) == 1 && c != '\n') {
    }
  }
  std::vector<std::thread> pool;
  if (churn > 0) {
    for (uint64_t k = 0; k < churn; ++k) {
      std::thread([k] {
        for (uint64_t s = 0; s < 3; ++s) NANOTRACE(test, churn, "thread={} seq={}", k, s);
      }).join();
    }
  } else if (spawn > 0) {
    // A sliding window of `alive` threads: thread k starts once thread k - alive has ended.
    std::vector<std::thread> window(alive > 0 ? alive : 1);
    for (uint64_t k = 0; k < spawn; ++k) {
      std::thread& t = window[k % window.size()];
      if (t.joinable()) t.join();
      t = std::thread([k, events] { produce(k, events, false); });
    }
    for (auto& t : window)
      if (t.joinable()) t.join();
  } else {
    std::vector<uint64_t> attempted(threads);
    std::latch start(together ? static_cast<std::ptrdiff_t>(threads) : 0);
    for (uint64_t t = 0; t < threads; ++t) {
      pool.emplace_back([t, events, forever, together, &attempted, &start] {
        if (together) start.arrive_and_wait();
        attempted[t] = produce(t, events, forever);
      });
    }
    if (forever) {
      wait_stdin_closed();
      g_stop = true;
    }
    for (auto& t : pool) t.join();
    if (forever) {
      for (uint64_t t = 0; t < threads; ++t) {
        std::printf("attempted %llu %llu\n", static_cast<unsigned long long>(t),
                    static_cast<unsigned long long>(attempted[t]));
      }
      std::fflush(stdout);
    }
  }
  if (crash) {
    std::printf("crashing\n");
    std::fflush(stdout);
    raise(SIGSEGV);
  }
  if (hold) {
    std::printf("ready\n");
    std::fflush(stdout);
    wait_stdin_closed();
  }
  return 0;
}
