// Optional fatal-signal handler (NANOTRACE_CRASH_HANDLER=1 or Options::crash_handler): on
// SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT it marks the segment crashed with the signal and
// the faulting thread, then lets the signal kill the process as it would have. The segment
// outlives the process either way; the mark tells `nanotrace list` and `recover` why.
// Only async-signal-safe operations: plain stores to shared memory and syscalls.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
abi::SegmentHeader* g_header = nullptr;
struct sigaction g_previous[sizeof(kSignals) / sizeof(kSignals[0])];

void on_fatal_signal(int sig, siginfo_t*, void*) {
  if (g_header != nullptr && g_header->pid == static_cast<uint32_t>(getpid())) {
    g_header->crash_signal = static_cast<uint32_t>(sig);
    g_header->crash_tid = static_cast<uint32_t>(syscall(SYS_gettid));
    __atomic_store_n(&g_header->state, static_cast<uint32_t>(abi::ProcessState::kCrashed),
                     __ATOMIC_RELEASE);
  }
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    if (kSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
  }
  raise(sig);  // re-delivered with the previous disposition once we return
}

}  // namespace

void install_crash_handler() {
  g_header = Runtime::instance().segment.header();
  static bool installed = false;
  if (installed) return;
  installed = true;
  // An alternate stack, so a stack overflow still reaches the handler.
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof(alt_stack);
  sigaltstack(&ss, nullptr);
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(kSignals[i], &sa, &g_previous[i]);
  }
}

}  // namespace nanotrace::runtime
