// Test helper: one thread writes test:rec records in a tight loop while a fast timer signal,
// delivered to that same thread, writes test:rec records from its handler: a tracepoint
// that interrupts another tracepoint on the same thread.
//
//   signal_producer SIGNALS INTERVAL_US
//
// The loop runs until the handler has run SIGNALS times (a timer every INTERVAL_US). The
// loop's records are thread 0, the handler's thread 1, each numbered from 0. Prints
// "pid <pid>", then "attempted <loop records> <handler records>" and "ready" when done,
// and exits 0 when stdin closes; prints "hung" and exits 3 if the loop has not finished
// within a minute.
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nanotrace/nanotrace.hpp>
#include <thread>

#include "common/records.hpp"

namespace {

volatile sig_atomic_t g_handler_records = 0;
uint64_t g_handler_seq = 0;  // only the handler touches it, on one thread

void rec(uint64_t thread, uint64_t seq) {
  uint64_t value = seq * 7 + thread;
  NANOTRACE(test, rec, "thread={} seq={} value={} check={}", thread, seq, value,
            nanotrace::testing::producer_checksum(thread, seq, value));
}

void on_timer(int) {
  int saved = errno;
  rec(1, g_handler_seq++);
  g_handler_records = g_handler_records + 1;
  errno = saved;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long signals = std::atol(argv[1]), interval_us = std::atol(argv[2]);
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  uint64_t loop_records = 0;
  std::atomic<bool> done{false};
  std::thread worker([&] {
    struct sigaction sa {};
    sa.sa_handler = on_timer;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGRTMIN, &sa, nullptr);
    sigevent ev{};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGRTMIN;
    ev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) std::abort();
    itimerspec spec{};
    spec.it_interval.tv_nsec = interval_us * 1000;
    spec.it_value.tv_nsec = interval_us * 1000;
    timer_settime(timer, 0, &spec, nullptr);
    uint64_t seq = 0;
    while (g_handler_records < signals) {
      for (int i = 0; i < 256; ++i) rec(0, seq++);
    }
    // Stop the timer and let a signal already on its way land before counting.
    spec = {};
    timer_settime(timer, 0, &spec, nullptr);
    timer_delete(timer);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    timespec zero{};
    while (sigtimedwait(&set, nullptr, &zero) > 0) on_timer(SIGRTMIN);
    loop_records = seq;
    done = true;
  });
  // A deadlocked worker (a tracepoint interrupted while it held a lock that the handler's
  // tracepoint needs) is reported rather than left to hang the test.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done.load()) {
    if (std::chrono::steady_clock::now() > give_up) {
      std::printf("hung\n");
      std::fflush(stdout);
      _exit(3);
    }
    usleep(10000);
  }
  worker.join();
  std::printf("attempted %llu %llu\nready\n", static_cast<unsigned long long>(loop_records),
              static_cast<unsigned long long>(g_handler_records));
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  return 0;
}
