// A traced program for the duration trigger tests: it writes dur:begin / dur:end pairs keyed
// by req, with durations the test chooses, then holds until its stdin closes.
//   pairs_producer SCENARIO [ARGS...]
//   fast N US             N pairs of US microseconds, one after the other
//   slow N US SLOW_US AT  as fast, and pair number AT takes SLOW_US
//   stuck N US OPEN_KEY   as fast, then begins OPEN_KEY and never ends it
//   flood N               N begins of distinct keys, never ended
//   resumed N US          N pairs of US, resuming the rings whenever the trigger froze them
//   drift N US PERCENT    N pairs whose duration grows from US by PERCENT % over the run;
//                         prints "drifted", reads a number of microseconds from stdin and,
//                         if over 0, writes one pair that long (key N)
//   threads T N US        T threads, each N pairs of US (keys by thread)
//   handoff T N EVERY [KEY]  T threads, each N begins (keys interleaved); one in EVERY of them
//                         is ended by another thread, the others by the thread that began
//                         them; with KEY, the first thread then waits until every one ended,
//                         200 ms more, and begins KEY and never ends it
//   strings N             N pairs of str:begin / str:end keyed by a string name ("op-I") and a
//                         number (shard), the pair N/2 taking 30 ms
//   serve FILE            pairs of 50 us every millisecond until stdin closes; once FILE
//                         exists, begins req 424242 and never ends it (a stuck operation)
// Prints "pid P" first and "ready" once done (with the number of resumes for `resumed`).
// NANOTRACE_TRIGGER arms the trigger (or the test arms it through `nanotrace arm`, after
// "armed?" is printed and a line is read from stdin, when the first argument is --wait).
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Waits `us` microseconds: sleeping for long waits, spinning the last stretch.
void wait_us(double us) {
  const uint64_t until = now_ns() + static_cast<uint64_t>(us * 1000);
  if (us > 200) {
    timespec ts{0, static_cast<long>((us - 100) * 1000)};
    ts.tv_sec = ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    nanosleep(&ts, nullptr);
  }
  while (now_ns() < until) {
  }
}

// Begins req, waits, ends it; or only begins or only ends it (an operation another thread
// ends). Threads that begin or end alone go through it too, so that no end site of theirs is
// registered before the first begin, however the compiler orders the functions (an arming
// error names the first site whose key does not bind, and the tests expect the begin's).
void pair(uint64_t req, double us, bool begin = true, bool end = true) {
  if (begin) NANOTRACE(dur, begin, "req={} len={}", req, uint32_t{4096});
  if (us > 0) wait_us(us);
  if (end) NANOTRACE(dur, end, "req={} result={}", req, int32_t{0});
}

double arg(char** argv, int argc, int i) {
  if (i >= argc) {
    std::fprintf(stderr, "pairs_producer: missing argument %d\n", i);
    std::exit(2);
  }
  return std::strtod(argv[i], nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  int a = 1;
  if (a < argc && std::strcmp(argv[a], "--wait") == 0) {
    ++a;
    NANOTRACE(dur, begin, "req={} len={}", uint64_t{~0ull}, uint32_t{0});  // registers the ring
    NANOTRACE(dur, end, "req={} result={}", uint64_t{~0ull}, int32_t{0});
    std::printf("armed?\n");
    std::fflush(stdout);
    std::string line;
    std::getline(std::cin, line);
  }
  if (a >= argc) return 2;
  const std::string scenario = argv[a];
  uint64_t resumes = 0;
  if (scenario == "fast" || scenario == "slow" || scenario == "stuck") {
    const auto n = static_cast<uint64_t>(arg(argv, argc, a + 1));
    const double us = arg(argv, argc, a + 2);
    const double slow_us = scenario == "slow" ? arg(argv, argc, a + 3) : 0;
    const auto at = scenario == "slow" ? static_cast<uint64_t>(arg(argv, argc, a + 4)) : ~0ull;
    for (uint64_t i = 0; i < n; ++i) pair(i, i == at ? slow_us : us);
    if (scenario == "stuck") {
      const auto key = static_cast<uint64_t>(arg(argv, argc, a + 3));
      NANOTRACE(dur, begin, "req={} len={}", key, uint32_t{65536});
    }
  } else if (scenario == "flood") {
    const auto n = static_cast<uint64_t>(arg(argv, argc, a + 1));
    for (uint64_t i = 0; i < n; ++i) NANOTRACE(dur, begin, "req={} len={}", i, uint32_t{1});
  } else if (scenario == "resumed") {
    const auto n = static_cast<uint64_t>(arg(argv, argc, a + 1));
    const double us = arg(argv, argc, a + 2);
    for (uint64_t i = 0; i < n; ++i) {
      pair(i, us);
      if (nanotrace::frozen() && nanotrace::resume().ok()) ++resumes;
    }
  } else if (scenario == "drift") {
    const auto n = static_cast<uint64_t>(arg(argv, argc, a + 1));
    const double us = arg(argv, argc, a + 2);
    const double percent = arg(argv, argc, a + 3);
    for (uint64_t i = 0; i < n; ++i) {
      pair(i, us * (1 + percent / 100 * static_cast<double>(i) / static_cast<double>(n)));
    }
    // The test reads the threshold, then asks for one pair of this many microseconds.
    std::printf("drifted\n");
    std::fflush(stdout);
    std::string line;
    std::getline(std::cin, line);
    const double outlier = std::strtod(line.c_str(), nullptr);
    if (outlier > 0) pair(n, outlier);
  } else if (scenario == "threads") {
    const int t = static_cast<int>(arg(argv, argc, a + 1));
    const auto n = static_cast<uint64_t>(arg(argv, argc, a + 2));
    const double us = arg(argv, argc, a + 3);
    std::vector<std::thread> threads;
    for (int k = 0; k < t; ++k) {
      threads.emplace_back([=] {
        for (uint64_t i = 0; i < n; ++i) pair((static_cast<uint64_t>(k) << 32) | i, us);
      });
    }
    for (auto& th : threads) th.join();
  } else if (scenario == "handoff") {
    const int t = static_cast<int>(arg(argv, argc, a + 1));
    const auto n = static_cast<uint64_t>(arg(argv, argc, a + 2));
    const auto every = static_cast<uint64_t>(arg(argv, argc, a + 3));
    const bool stuck = a + 4 < argc;
    const auto stuck_key = stuck ? static_cast<uint64_t>(arg(argv, argc, a + 4)) : 0;
    std::mutex mu;
    std::vector<uint64_t> handed;
    std::atomic<int> done{0};
    // At most 256 handed over and not yet ended (the ending thread may get the CPU less often
    // than the others): the table's bounds are not what this tests.
    std::atomic<uint64_t> waiting{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < t; ++k) {
      threads.emplace_back([&, k] {
        for (uint64_t i = 0; i < n; ++i) {
          // The threads' keys interleaved: those in flight are close together, as request
          // numbers from one counter are (keys by thread in the high bits would share the
          // shared table's buckets thread by thread).
          const uint64_t req = i * static_cast<uint64_t>(t) + static_cast<uint64_t>(k);
          if (i % every == 0) {
            while (waiting.load() >= 256) std::this_thread::yield();
          }
          const bool handed_over = i % every == 0;
          pair(req, 0, true, !handed_over);
          if (handed_over) {
            waiting.fetch_add(1);
            std::lock_guard lock(mu);
            handed.push_back(req);
          }
        }
        done.fetch_add(1);
        if (k == 0 && stuck) {
          while (done.load() < t || waiting.load() != 0) std::this_thread::yield();
          wait_us(200000);
          pair(stuck_key, 0, true, false);
        }
      });
    }
    threads.emplace_back([&] {
      for (;;) {
        const bool last = done.load() == t;
        std::vector<uint64_t> reqs;
        {
          std::lock_guard lock(mu);
          reqs.swap(handed);
        }
        for (uint64_t req : reqs) pair(req, 0, false, true);
        waiting.fetch_sub(reqs.size());
        if (last && reqs.empty()) break;
      }
    });
    for (auto& th : threads) th.join();
  } else if (scenario == "strings") {
    const auto n = static_cast<uint64_t>(arg(argv, argc, a + 1));
    for (uint64_t i = 0; i < n; ++i) {
      const std::string name = "op-" + std::to_string(i);
      NANOTRACE(str, begin, "name={} shard={}", name, uint32_t(i % 4));
      if (i == n / 2) wait_us(30000);
      NANOTRACE(str, end, "shard={} name={} ok={}", uint32_t(i % 4), name, true);
    }
  } else if (scenario == "serve") {
    const std::string file = a + 1 < argc ? argv[a + 1] : "";
    std::thread server([&] {
      bool stuck = false;
      for (uint64_t i = 0; !g_stop.load(); ++i) {
        pair(i, 50);
        if (!stuck && access(file.c_str(), F_OK) == 0) {
          NANOTRACE(dur, begin, "req={} len={}", uint64_t{424242}, uint32_t{65536});
          stuck = true;
        }
        wait_us(1000);
      }
    });
    std::printf("ready 0\n");
    std::fflush(stdout);
    std::string line;
    std::getline(std::cin, line);
    g_stop.store(true);
    server.join();
    return 0;
  } else {
    std::fprintf(stderr, "pairs_producer: unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  std::printf("ready %llu\n", static_cast<unsigned long long>(resumes));
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);  // hold until the test closes stdin
  return 0;
}
