// A traced producer that paces itself: each thread writes records at a given rate, for a
// given time or until stdin closes. Used by the trace file tests and by
// scripts/record-bench.sh.
//
//   paced_producer [--threads T] [--rate EVENTS_PER_S_PER_THREAD] [--seconds S] [--events N]
//                  [--go] [--fields 4|2] [--spans]
//
// --fields 4 (default): test:rec, 40 bytes, the same thread + seq + value + checksum payload as
// tests/runtime/producer.cc. --fields 2: test:rec2 "seq={} check={}", 24 bytes, the size of a
// typical I/O event ("req={} lat={}"); seq is the thread number in the top 16 bits and the
// per-thread sequence number below, check is checksum(thread, seq, seq * 7 + thread), so a
// reader can still prove every record present and intact.
// --spans: each batch of 256 records is also a pair test:span_begin "id={} pid={}" ..
// test:span_end "id={}" (id: pid << 40 | thread << 32 | batch number, unique across
// processes), for latency across processes.
// --events N: each thread stops after N records (rounded up to a batch of 256), the same work
// on any machine; --seconds S stops after S seconds. --rate 0 writes at full speed. --go waits for
// stdin to close (or a line) before starting. Prints "pid <pid>" first and, at the end, "done
// <records> <seconds>" (records of all threads, wall time of the producing phase).
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/nanotrace.hpp>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};

uint64_t checksum(uint64_t thread, uint64_t seq, uint64_t value) {
  uint64_t x = thread * 0x9e3779b97f4a7c15ull ^ seq * 0xbf58476d1ce4e5b9ull ^ value;
  x ^= x >> 31;
  return x * 0x94d049bb133111ebull;
}

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void produce(uint64_t thread, double rate, double seconds, uint64_t events, int fields, bool spans,
             std::atomic<uint64_t>* total) {
  const uint64_t pid = static_cast<uint64_t>(getpid());
  const double t0 = now_s();
  uint64_t seq = 0;
  for (;;) {
    double t = now_s() - t0;
    if (seq > 0 && (g_stop.load(std::memory_order_relaxed) || (seconds > 0 && t >= seconds) ||
                    (events > 0 && seq >= events))) {
      break;
    }
    if (rate > 0) {
      // Ahead of the pace: wait, but never past the end of the run nor long without looking
      // at g_stop (at a low rate one batch is ahead by minutes).
      double ahead = static_cast<double>(seq) / rate - t;
      if (seconds > 0 && ahead > seconds - t) ahead = seconds - t;
      if (ahead > 0.1) ahead = 0.1;
      if (ahead > 0.0002) {
        usleep(static_cast<useconds_t>(ahead * 1e6));
        continue;
      }
    }
    const uint64_t span = pid << 40 | thread << 32 | seq / 256;
    if (spans) NANOTRACE(test, span_begin, "id={} pid={}", span, pid);
    if (fields == 2) {
      for (int i = 0; i < 256; ++i, ++seq) {
        NANOTRACE(test, rec2, "seq={} check={}", thread << 48 | seq,
                  checksum(thread, seq, seq * 7 + thread));
      }
    } else {
      for (int i = 0; i < 256; ++i, ++seq) {
        uint64_t value = seq * 7 + thread;
        NANOTRACE(test, rec, "thread={} seq={} value={} check={}", thread, seq, value,
                  checksum(thread, seq, value));
      }
    }
    if (spans) NANOTRACE(test, span_end, "id={}", span);
  }
  total->fetch_add(seq);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t threads = 1;
  double rate = 0, seconds = 0;
  uint64_t events = 0;
  int fields = 4;
  bool go = false, spans = false;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&] { return i + 1 < argc ? std::strtod(argv[++i], nullptr) : 0.0; };
    if (!std::strcmp(argv[i], "--threads")) {
      threads = static_cast<uint64_t>(arg());
    } else if (!std::strcmp(argv[i], "--rate")) {
      rate = arg();
    } else if (!std::strcmp(argv[i], "--seconds")) {
      seconds = arg();
    } else if (!std::strcmp(argv[i], "--events")) {
      events = static_cast<uint64_t>(arg());
    } else if (!std::strcmp(argv[i], "--fields")) {
      fields = static_cast<int>(arg());
      if (fields != 2 && fields != 4) return 2;
    } else if (!std::strcmp(argv[i], "--go")) {
      go = true;
    } else if (!std::strcmp(argv[i], "--spans")) {
      spans = true;
    } else {
      return 2;
    }
  }
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  if (go) {
    char c;
    while (read(0, &c, 1) == 1 && c != '\n') {
    }
  }
  std::atomic<uint64_t> total{0};
  double t0 = now_s();
  std::vector<std::thread> pool;
  for (uint64_t t = 0; t < threads; ++t)
    pool.emplace_back(produce, t, rate, seconds, events, fields, spans, &total);
  if (seconds <= 0 && events == 0) {
    // Until stdin closes.
    char buf[64];
    while (read(0, buf, sizeof(buf)) > 0) {
    }
    g_stop = true;
  }
  for (auto& t : pool) t.join();
  std::printf("done %llu %.6f\n", static_cast<unsigned long long>(total.load()), now_s() - t0);
  std::fflush(stdout);
  return 0;
}
