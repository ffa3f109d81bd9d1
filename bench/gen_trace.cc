// Writes a large, known trace for the export benchmark: --events records in total, spread
// over --threads threads, as io:submit{req,dev,offset,len} / io:complete{req,result,lat_us}
// pairs (as the storage_sim example), back to back. Run it with NANOTRACE_KEEP=1 and a
// NANOTRACE_BUFFER large enough to hold every record (e.g. 256M for 10 M events on 4
// threads); it prints "gen_trace pid PID segment PATH".
//
//   gen_trace [--events N] [--threads T]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  uint64_t events = 10000000;
  int threads = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--events")) {
      events = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--threads")) {
      threads = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: gen_trace [--events N] [--threads T]\n");
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  std::printf("gen_trace pid %d segment %s\n", getpid(), nanotrace::segment_path().c_str());
  std::fflush(stdout);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([t, threads, events] {
      const char* devs[] = {"nvme0n1", "nvme1n1"};
      uint64_t pairs = events / 2 / threads;
      for (uint64_t i = 0; i < pairs; ++i) {
        uint64_t req = uint64_t(t) << 40 | i;
        uint32_t len = 4096u << (i & 3);
        NANOTRACE(io, submit, "req={} dev={} offset={} len={}", req, devs[i & 1], i * 4096, len);
        NANOTRACE(io, complete, "req={} result={} lat_us={}", req, static_cast<int>(len), 12.5);
      }
    });
  }
  for (auto& th : pool) th.join();
  return 0;
}
