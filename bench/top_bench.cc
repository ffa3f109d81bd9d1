// `nanotrace top`'s cost per frame: the CPU time (this thread's, user and system) of one
// LiveView::sample() over N traced processes (top_producer, default 50), each doing
// operations io:submit/io:complete with 16 in flight and one that never ends, at several
// rates. The rates are interleaved frame by frame (idle, low, high, idle, low, high, ...),
// each measured frame covering one interval at its rate after a frame that absorbed the
// change; medians and 90th percentiles per rate, with the records per frame and the records
// the view missed (a ring that wrapped between two frames).
//
//   top_bench [--processes N] [--rounds R] [--interval S] [--json FILE]
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "live/live_view.hpp"

namespace {

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

struct Producer {
  pid_t pid = -1;
  int stdin_fd = -1;
  FILE* out = nullptr;
};

Producer spawn(const std::string& program, const std::string& level_file) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) std::abort();
  Producer p;
  p.pid = fork();
  if (p.pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    execl(program.c_str(), program.c_str(), level_file.c_str(), nullptr);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  p.stdin_fd = in[1];
  p.out = fdopen(out[0], "r");
  return p;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  int processes = 50, rounds = 9;
  double interval = 1.0;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--processes")) processes = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--interval")) interval = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--json")) json_path = argv[i + 1];
  }
  std::string self = argv[0];
  const std::string producer = self.substr(0, self.rfind('/') + 1) + "top_producer";
  const std::string level_file = "/dev/shm/nanotrace-top-bench-" + std::to_string(getpid());
  int fd = open(level_file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) return 1;
  auto* level = static_cast<std::atomic<uint32_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  std::vector<Producer> children;
  nanotrace::live::LiveOptions options;
  for (int i = 0; i < processes; ++i) {
    children.push_back(spawn(producer, level_file));
    options.sources.push_back(std::to_string(children.back().pid));
  }
  char line[64];
  for (Producer& p : children) {
    if (!fgets(line, sizeof line, p.out)) return 1;
  }
  auto view = nanotrace::live::LiveView::create(options);
  if (!view.ok()) {
    std::fprintf(stderr, "top_bench: %s\n", view.status().message().c_str());
    return 1;
  }
  // Operations per second of each process; two records each.
  const uint32_t rates[] = {0, 1000, 10000};
  struct Side {
    std::vector<double> cpu_ms;
    uint64_t records = 0, missed = 0, open = 0;
  } sides[3];
  (*view)->sample();  // the rings' past
  for (int r = 0; r < rounds; ++r) {
    for (int s = 0; s < 3; ++s) {
      level->store(rates[s]);
      std::this_thread::sleep_for(std::chrono::duration<double>(interval));
      (*view)->sample();  // the interval the rate changed in
      std::this_thread::sleep_for(std::chrono::duration<double>(interval));
      const double before = thread_cpu_ms();
      nanotrace::live::LiveFrame f = (*view)->sample();
      sides[s].cpu_ms.push_back(thread_cpu_ms() - before);
      for (const auto& p : f.processes) {
        sides[s].records += p.records;
        sides[s].missed += p.missed_interval;
      }
      sides[s].open += f.open_total;
    }
  }
  nlohmann::json out = {
      {"processes", processes}, {"rounds", rounds}, {"interval_s", interval}, {"budget_ms", 20}};
  std::printf("top frame CPU, %d traced processes, %d interleaved rounds of %.1f s frames:\n",
              processes, rounds, interval);
  for (int s = 0; s < 3; ++s) {
    const double median = quantile(sides[s].cpu_ms, 0.5), p90 = quantile(sides[s].cpu_ms, 0.9);
    const uint64_t per_frame = sides[s].records / rounds;
    std::printf(
        "  %6u ops/s each (%8llu records/frame, %llu missed, %llu open): median %.2f ms, p90 "
        "%.2f ms%s\n",
        rates[s], static_cast<unsigned long long>(per_frame),
        static_cast<unsigned long long>(sides[s].missed),
        static_cast<unsigned long long>(sides[s].open / rounds), median, p90,
        median <= 20 ? "" : "  OVER the 20 ms budget");
    out["rates"].push_back({{"ops_per_second_each", rates[s]},
                            {"records_per_frame", per_frame},
                            {"missed", sides[s].missed},
                            {"open_per_frame", sides[s].open / rounds},
                            {"cpu_ms", sides[s].cpu_ms},
                            {"median_ms", median},
                            {"p90_ms", p90}});
  }
  for (Producer& p : children) close(p.stdin_fd);
  for (Producer& p : children) waitpid(p.pid, nullptr, 0);
  unlink(level_file.c_str());
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
