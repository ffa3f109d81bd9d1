// Test helper: a traced process that forks in the ways real programs do.
//
//   fork_helper thread ITERATIONS   fork from a traced non-main thread; the child writes
//                                   test:child records and exits from that thread
//   fork_helper exec [--trace-first] PROGRAM ARGS...
//                                   fork, (optionally write one record in the child,) exec
//
// Prints "pid <pid>" first. The parent keeps a second traced thread busy while it forks. For
// each child it prints "child <pid>" when forked and "status <pid> <wait status>" when
// reaped (with " hung" if it had not exited within 2 s and was killed), then writes test:rec
// records 0..999 of thread 100 (for the test to check the parent's records), prints "ready" and
// exits 0 when stdin closes.
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/nanotrace.hpp>
#include <thread>
#include <vector>

#include "common/records.hpp"

namespace {

std::atomic<bool> g_stop{false};

void rec(uint64_t thread, uint64_t seq) {
  uint64_t value = seq * 7 + thread;
  NANOTRACE(test, rec, "thread={} seq={} value={} check={}", thread, seq, value,
            nanotrace::testing::producer_checksum(thread, seq, value));
}

void report_child(pid_t child) {
  std::printf("child %d\n", child);
  std::fflush(stdout);
  // A child that does not exit within 2 s is killed and reported as hung.
  int status = 0;
  bool hung = false;
  for (int i = 0; waitpid(child, &status, WNOHANG) != child; ++i) {
    if (i == 400) {
      hung = true;
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      break;
    }
    usleep(5000);
  }
  std::printf("status %d %d%s\n", child, status, hung ? " hung" : "");
  std::fflush(stdout);
}

// In the child, the forking thread is the only one: it writes its own records and then
// leaves through the thread exit path, which ends the process with status 0.
void* forking_thread(void* arg) {
  uint64_t iteration = reinterpret_cast<uintptr_t>(arg);
  for (uint64_t i = 0; i < 100; ++i) rec(iteration, i);
  pid_t child = fork();
  if (child == 0) {
    for (uint64_t i = 0; i < 50; ++i) NANOTRACE(test, child, "iteration={} i={}", iteration, i);
    pthread_exit(nullptr);
  }
  if (child > 0) report_child(child);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  std::thread busy([] {
    for (uint64_t seq = 0; !g_stop.load(std::memory_order_relaxed); ++seq) {
      rec(1000, seq);
      if (seq % 64 == 0) usleep(50);
    }
  });
  if (!std::strcmp(argv[1], "thread")) {
    int iterations = std::atoi(argv[2]);
    for (int i = 0; i < iterations; ++i) {
      pthread_t t;
      pthread_create(&t, nullptr, forking_thread, reinterpret_cast<void*>(uintptr_t(i)));
      pthread_join(t, nullptr);
    }
  } else if (!std::strcmp(argv[1], "exec")) {
    int first = 2;
    bool trace_first = !std::strcmp(argv[2], "--trace-first");
    if (trace_first) ++first;
    if (first >= argc) return 2;
    rec(0, 0);
    pid_t child = fork();
    if (child == 0) {
      if (trace_first) NANOTRACE(test, child, "iteration={} i={}", uint64_t{0}, uint64_t{0});
      execv(argv[first], argv + first);
      _exit(127);
    }
    report_child(child);
  } else {
    return 2;
  }
  g_stop = true;
  busy.join();
  for (uint64_t i = 0; i < 1000; ++i) rec(100, i);
  std::printf("ready\n");
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  return 0;
}
