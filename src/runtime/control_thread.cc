// The control thread of a traced process. It sleeps on the segment's control_seq futex word;
// a controller in another process (nanotrace enable/disable) changes the group table, bumps
// control_seq and wakes it, and the thread sets the call sites' enable flags, which live in
// process memory so the disabled check stays a single load. It also refreshes the clock
// calibration pair. It records no events and costs nothing while nothing changes.
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <thread>

#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

void control_loop() {
  pthread_setname_np(pthread_self(), "nanotrace-ctl");
  Runtime& rt = Runtime::instance();
  int wakeups = 0;
  for (;;) {
    uint32_t* word;
    uint32_t seen;
    {
      std::lock_guard lock(rt.mu);
      if (!rt.started) return;
      abi::SegmentHeader* h = rt.segment.header();
      refresh_clock(h);
      rt.process_trigger_request_locked();
      rt.apply_groups_locked();
      word = &h->control_seq;
      seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    }
    // Frequent calibration early (the rate estimate converges), then once a second.
    long wait_ns = wakeups < 10 ? 100 * 1000 * 1000 : 999 * 1000 * 1000;
    timespec ts{wait_ns / 1000000000, wait_ns % 1000000000};
    syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, nullptr, 0);
    ++wakeups;
  }
}

}  // namespace

void Runtime::start_control_thread() {
  if (control_thread_running) return;
  control_thread_running = true;
  // Signals stay with the application's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  std::thread(control_loop).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace nanotrace::runtime
