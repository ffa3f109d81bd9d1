// Test program for kernel loss accounting: a traced process that, on a line from stdin,
// makes exactly N getppid system calls on its main thread, so a test knows how many
// syscalls:sys_enter_getppid events the kernel logged for it.
//
//   nanotrace_syscall_burst N
//
// Prints "ready PID" once traced (its segment exists), waits for a line, makes the N calls,
// prints "done", then waits until stdin closes.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nanotrace/nanotrace.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: nanotrace_syscall_burst N\n");
    return 2;
  }
  const long calls = std::atol(argv[1]);
  NANOTRACE(test, burst, "calls={}", calls);
  std::printf("ready %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  char line[64];
  if (!std::fgets(line, sizeof line, stdin)) return 1;
  for (long i = 0; i < calls; ++i) syscall(SYS_getppid);  // glibc's getppid() is the same call
  NANOTRACE(test, burst_done, "calls={}", calls);
  std::printf("done\n");
  std::fflush(stdout);
  while (std::fgets(line, sizeof line, stdin)) {
  }
  return 0;
}
