// `nanotrace run [-o FILE] [--summary] [--stop-on EXPR] [--snapshot-on EXPR] -- CMD ARGS...`:
// trace a program nobody instrumented. Starts CMD with the I/O interposer (libnanotrace_io.so)
// preloaded, records it and every process it starts into one trace file, passes SIGINT and
// SIGTERM on to it, and exits with its status (128 + the signal if a signal killed it; 127 if
// it was not found).
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "base/utf8.hpp"
#include "nanotrace/record.hpp"
#include "record_commands.hpp"
#include "run_commands.hpp"

#ifndef NANOTRACE_INSTALL_LIBDIR
#define NANOTRACE_INSTALL_LIBDIR "/usr/local/lib"
#endif

namespace nanotrace::cli {
namespace {

std::atomic<int> g_forward{0};

// Signals a user sent us (kill): passed on. A terminal's Ctrl-C reached the command too
// (same process group), so the kernel's own are not sent twice.
void on_signal(int sig, siginfo_t* info, void*) {
  if (info == nullptr || info->si_code <= 0) g_forward.store(sig, std::memory_order_relaxed);
}

// The interposer: NANOTRACE_IO_LIB, else next to this program's libraries (installed:
// ../lib*/; build tree: ../src/interpose/), else the install directory.
std::string find_interposer() {
  if (const char* env = std::getenv("NANOTRACE_IO_LIB"); env != nullptr && env[0] != '\0') {
    return env;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/'));
    for (const char* rel : {"/../lib/libnanotrace_io.so", "/../lib64/libnanotrace_io.so",
                            "/../src/interpose/libnanotrace_io.so"}) {
      std::string candidate = dir + rel;
      if (access(candidate.c_str(), R_OK) == 0) return candidate;
    }
  }
  return std::string(NANOTRACE_INSTALL_LIBDIR) + "/libnanotrace_io.so";
}

}  // namespace

void register_run_command(CLI::App& app, RunCommand* c) {
  c->run = app.add_subcommand("run", "Run a command with its I/O traced (every process it starts)");
  c->run->add_option("-o,--output", c->output, "trace file to write")
      ->default_val("nanotrace-run.ntr");
  c->run->add_flag("--summary", c->summary,
                   "print calls, bytes, errors and latency per file and operation");
  c->run->add_flag("--compress", c->compress, "zstd-compress each chunk");
  c->run
      ->add_option("--kernel", c->kernel,
                   "also record kernel events (root), as `record --kernel`; thread events "
                   "are those of the command's processes")
      ->delimiter(',');
  c->run
      ->add_option("--kernel-buffer", c->kernel_buffer_kb,
                   "ftrace's buffer per CPU in KiB (default 4096)")
      ->check(CLI::Range(4u, 1u << 20));
  c->run->add_option("--stop-on", c->stop_on,
                     "stop recording right after a record of any of the command's processes "
                     "matching EXPR (the command runs on, untraced)");
  c->run->add_option("--snapshot-on", c->snapshot_on,
                     "write OUTPUT.snapN of the rings of every process of the command when a "
                     "record matches EXPR (at most one a second)");
  c->run
      ->add_option("--kernel-flight-buffer", c->kernel_flight_buffer_kb,
                   "with --kernel and --snapshot-on: the per-CPU buffer in KiB of the kernel "
                   "events each snapshot holds, as `record --kernel-flight-buffer`")
      ->check(CLI::Range(4u, 1u << 20));
  c->run->add_option("COMMAND", c->command, "the command and its arguments (after --)")->required();
  c->run->positionals_at_end();
  register_summary_command(app, c);
}

int cmd_run(const RunCommand& c) {
  RunOptions o;
  o.output = c.output;
  o.command = c.command;
  o.compress = c.compress;
  o.kernel = c.kernel;
  o.kernel_buffer_kb = c.kernel_buffer_kb;
  o.kernel_flight_buffer_kb = c.kernel_flight_buffer_kb;
  o.stop_on = c.stop_on;
  o.snapshot_on = c.snapshot_on;
  o.interposer = find_interposer();
  o.forward_signal = &g_forward;
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  auto r = run_command(o);
  if (!r.ok()) {
    fail(r.status());
    return r.status().code() == StatusCode::kNotFound ? 127 : 1;
  }
  const RunSummary& s = *r;
  for (const std::string& w : s.warnings) {
    std::fprintf(stderr, "nanotrace: warning: %s\n", utf8::escape_text(w).c_str());
  }
  if (s.processes.empty()) {
    std::fprintf(stderr,
                 "nanotrace: %s ran untraced: the interposer did not load (a statically linked "
                 "program, or a setuid one, for which the loader ignores LD_PRELOAD)\n",
                 c.command[0].c_str());
  } else {
    std::fprintf(stderr, "nanotrace: %llu records of %zu process%s in %s (%.1f MB, %.2f s)",
                 static_cast<unsigned long long>(s.records), s.processes.size(),
                 s.processes.size() == 1 ? "" : "es", c.output.c_str(), double(s.file_bytes) / 1e6,
                 s.seconds);
    if (s.lost > 0) {
      std::fprintf(stderr, ", %llu lost", static_cast<unsigned long long>(s.lost));
    }
    std::fprintf(stderr, "\n");
  }
  if (!o.kernel.empty() && s.kernel_pages > 0) {
    std::fprintf(stderr, "nanotrace: kernel: %llu ftrace sub-buffers, %llu kernel events lost\n",
                 static_cast<unsigned long long>(s.kernel_pages),
                 static_cast<unsigned long long>(s.kernel_lost));
  }
  print_trigger_outcome("nanotrace: ", s.stop_match, s.snapshots, s.snapshot_kernel,
                        s.trigger_counts);
  if (s.killed_by != 0) {
    std::fprintf(stderr, "nanotrace: %s was killed by signal %d (%s)%s\n", c.command[0].c_str(),
                 s.killed_by, strsignal(s.killed_by), s.core_dumped ? ", core dumped" : "");
  }
  if (c.summary && !s.processes.empty()) {
    std::fflush(stdout);
    (void)print_io_summary(c.output, /*json=*/false);
  }
  return s.exit_code;
}

bool run_run_command(const RunCommand& c, int* status) {
  if (c.run != nullptr && c.run->parsed()) {
    *status = cmd_run(c);
    return true;
  }
  if (c.summary_cmd != nullptr && c.summary_cmd->parsed()) {
    *status = print_io_summary(c.source, c.json);
    return true;
  }
  return false;
}

}  // namespace nanotrace::cli
