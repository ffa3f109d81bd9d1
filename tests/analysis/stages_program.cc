// A traced program of three stages per request (parse, compute, write: begin/end pairs by
// req), each a busy wait to a deadline so that its time does not depend on the machine's
// speed, and a planted regression for `nanotrace diff` to find:
//   --delay-stage S --delay-us D  stage S (parse, compute or write) takes D us more
//   --tail-every K --tail-us T    every K-th request's write stage takes T us more
//   --sleep-us D                  the write stage also sleeps D us (off the CPU)
//   --parse-us P --compute-us C --write-us W
//                                 the stages' own lengths (default 40, 80, 60 us): short ones
//                                 make cheap runs of many requests, and are rarely preempted
//
//   stages_program --requests N [...]
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

void spin_us(uint64_t us) {
  const uint64_t until = now_ns() + us * 1000;
  while (now_ns() < until) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t requests = 1000, delay_us = 0, tail_every = 0, tail_us = 0, sleep_us = 0;
  uint64_t parse_us = 40, compute_us = 80, write_us = 60;
  std::string delay_stage;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* v = argv[i + 1];
    if (!std::strcmp(argv[i], "--requests")) {
      requests = std::strtoull(v, nullptr, 10);
    } else if (!std::strcmp(argv[i], "--delay-stage")) {
      delay_stage = v;
    } else if (!std::strcmp(argv[i], "--delay-us")) {
      delay_us = std::strtoull(v, nullptr, 10);
    } else if (!std::strcmp(argv[i], "--tail-every")) {
      tail_every = std::strtoull(v, nullptr, 10);
    } else if (!std::strcmp(argv[i], "--tail-us")) {
      tail_us = std::strtoull(v, nullptr, 10);
    } else if (!std::strcmp(argv[i], "--sleep-us")) {
      sleep_us = std::strtoull(v, nullptr, 10);
    } else if (!std::strcmp(argv[i], "--parse-us")) {
      parse_us = std::strtoull(v, nullptr, 10);
    } else if (!std::strcmp(argv[i], "--compute-us")) {
      compute_us = std::strtoull(v, nullptr, 10);
    } else if (!std::strcmp(argv[i], "--write-us")) {
      write_us = std::strtoull(v, nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: stages_program --requests N [--delay-stage S --delay-us D] "
                   "[--tail-every K --tail-us T] [--sleep-us D] [--parse-us P] "
                   "[--compute-us C] [--write-us W]\n");
      return 2;
    }
  }
  std::printf("stages_program pid %d segment %s\n", getpid(), nanotrace::segment_path().c_str());
  std::fflush(stdout);
  auto extra = [&](const char* stage) { return delay_stage == stage ? delay_us : 0; };
  for (uint64_t req = 0; req < requests; ++req) {
    NANOTRACE(stage, parse_begin, "req={}", req);
    spin_us(parse_us + extra("parse"));
    NANOTRACE(stage, parse_end, "req={}", req);
    NANOTRACE(stage, compute_begin, "req={}", req);
    spin_us(compute_us + extra("compute"));
    NANOTRACE(stage, compute_end, "req={}", req);
    NANOTRACE(stage, write_begin, "req={}", req);
    spin_us(write_us + extra("write") + (tail_every > 0 && req % tail_every == 0 ? tail_us : 0));
    if (sleep_us > 0) {
      const timespec ts{static_cast<time_t>(sleep_us / 1000000),
                        static_cast<long>(sleep_us % 1000000 * 1000)};
      nanosleep(&ts, nullptr);
    }
    NANOTRACE(stage, write_end, "req={}", req);
  }
  return 0;
}
