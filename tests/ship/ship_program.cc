// A traced program for the ClickHouse shipping tests: two worker threads each submit and
// complete --pairs / 2 I/Os (io:submit {req, dev, len} / io:complete {req, result}) with a
// little work of varying length between the two, and write app:note {ratio, ok} now and then.
// --hostile names the process and threads and fills the dev strings with ill-formed UTF-8,
// quotes, backslashes, tabs and newlines: text every output must store as valid UTF-8.
//
//   ship_program --pairs N [--req-base B] [--hostile]
//
// Request numbers are B + thread * 1000000 + i (B: 0), so that several runs merged into one
// trace (`nanotrace merge`) do not pair each other's requests.
#include <pthread.h>
#include <sys/prctl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <thread>
#include <vector>

namespace {

// Names of at most 15 bytes (the kernel's limit), cut inside a character on purpose.
const char kHostileProcess[] = "sp\xff'\"\\\t\xe2\x82";
const char kHostileThread[] = "w\xc3(\xed\xa0\x80`\n\\\x01";
const char kHostileDev[] = "dev\xc3(\xed\xa0\x80'\"\\\n\t;--\xf0\x9f\x98";

volatile uint64_t sink;

void work(uint64_t n) {
  uint64_t x = n;
  for (uint64_t i = 0; i < n; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink = x;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t pairs = 1000;
  bool hostile = false;
  uint64_t req_base = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--pairs") && i + 1 < argc) {
      pairs = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--req-base") && i + 1 < argc) {
      req_base = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--hostile")) {
      hostile = true;
    } else {
      std::fprintf(stderr, "usage: ship_program --pairs N [--req-base B] [--hostile]\n");
      return 2;
    }
  }
  if (hostile) prctl(PR_SET_NAME, kHostileProcess);
  NANOTRACE(app, note, "ratio={} ok={}", 0.5, true);
  std::printf("ship_program pid %d segment %s\n", getpid(), nanotrace::segment_path().c_str());
  std::fflush(stdout);
  std::vector<std::thread> workers;
  for (uint64_t t = 0; t < 2; ++t) {
    workers.emplace_back([t, pairs, hostile, req_base] {
      if (hostile) pthread_setname_np(pthread_self(), kHostileThread);
      const char* dev = hostile ? kHostileDev : (t == 0 ? "nvme0n1" : "sda");
      for (uint64_t i = 0; i < pairs / 2; ++i) {
        const uint64_t req = req_base + t * 1000000 + i;
        NANOTRACE(io, submit, "req={} dev={} len={}", req, dev, static_cast<uint32_t>(4096));
        work(50 + (i * 7919) % 400);
        NANOTRACE(io, complete, "req={} result={}", req, static_cast<int32_t>(4096));
        if (i % 100 == 0) NANOTRACE(app, note, "ratio={} ok={}", 1.0 / (1 + i), i % 2 == 0);
      }
    });
  }
  for (auto& w : workers) w.join();
  return 0;
}
