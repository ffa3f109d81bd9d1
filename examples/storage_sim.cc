// A small traced program: worker threads play a storage engine (submit an I/O, complete it
// some microseconds later, now and then an error), each step a nanotrace tracepoint. `make
// demo` runs it and reads it live with the nanotrace CLI. --stall-ms makes one I/O of worker
// 0 (number --stall-at, default 2000) wait that long before it completes: a slow or stuck
// operation for the duration triggers (docs/howto/slow-and-stuck.md).
//
//   storage_sim [--threads N] [--seconds S] [--ops N] [--gap-ns NS] [--stall-ms MS]
//               [--stall-at N]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};
uint64_t g_stall_ms = 0;
uint64_t g_stall_at = 2000;

void spin_ns(uint64_t ns) {
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

void worker(int index, uint64_t ops, uint64_t gap_ns) {
  std::string name = "worker-" + std::to_string(index);
  pthread_setname_np(pthread_self(), name.c_str());
  const char* devices[] = {"nvme0n1", "nvme1n1"};
  uint64_t seed = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 1);
  for (uint64_t req = 0; (ops == 0 || req < ops) && !g_stop.load(std::memory_order_relaxed);
       ++req) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    uint64_t offset = (seed % 1024) * 4096;
    uint32_t len = 4096u << (seed % 4);
    const char* dev = devices[seed & 1];
    uint64_t id = static_cast<uint64_t>(index) << 40 | req;
    NANOTRACE(io, submit, "req={} dev={} offset={} len={}", id, dev, offset, len);
    spin_ns(gap_ns);
    if (index == 0 && req == g_stall_at && g_stall_ms != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(g_stall_ms));
    }
    bool error = seed % 997 == 0;
    NANOTRACE(io, complete, "req={} result={} lat_us={}", id, error ? -5 : static_cast<int>(len),
              static_cast<double>(gap_ns) / 1000.0);
    if (error) NANOTRACE(io, error, "req={} errno={} dev={}", id, 5, dev);
    if (req % 64 == 0 && NANOTRACE_ENABLED(debug)) {
      NANOTRACE(debug, checkpoint, "worker={} done={} healthy={}", index, req, !error);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 5;
  uint64_t ops = 0;
  uint64_t gap_ns = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds"))
      seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ops"))
      ops = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--gap-ns"))
      gap_ns = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--stall-ms"))
      g_stall_ms = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--stall-at"))
      g_stall_at = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr,
                   "usage: storage_sim [--threads N] [--seconds S] [--ops N] [--gap-ns NS] "
                   "[--stall-ms MS] [--stall-at N]\n");
      return 2;
    }
  }
  std::printf("storage_sim pid %d segment %s\n", getpid(), nanotrace::segment_path().c_str());
  std::fflush(stdout);
  NANOTRACE(app, start, "threads={} seconds={}", threads, seconds);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker, i, ops, gap_ns);
  if (ops == 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    g_stop = true;
  }
  for (auto& t : pool) t.join();
  NANOTRACE(app, stop, "ok={}", true);
  return 0;
}
