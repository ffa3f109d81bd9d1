// `nanotrace run`: start a command with the I/O interposer preloaded and record every process
// image it and its descendants start into one trace file (docs/format.md: version 2, the
// process index in the high 16 bits of a chunk's slot), until the command exits.
//
// Finding the processes: the command's environment carries NANOTRACE_RUN_ID (a random number
// for this session), which every descendant inherits and whose runtime writes it into its
// segment header; the recorder scans /dev/shm for segments with that id. NANOTRACE_KEEP=1
// keeps a segment after its process exits (and an exec'd image's segment, set aside), so a
// process shorter than a scan interval is still found; the recorder removes each segment once
// it has taken everything from it. NANOTRACE_MODE=block (unless the caller chose a mode) makes
// a writer wait for the recorder rather than drop once the recorder is attached.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/process.hpp"
#include "nanotrace/record.hpp"
#include "record/file_writer.hpp"
#include "record/kernel_recording.hpp"
#include "record/process_session.hpp"

namespace nanotrace {
namespace {

uint64_t new_run_id() {
  uint64_t id = 0;
  if (getrandom(&id, sizeof(id), 0) != sizeof(id)) {
    id = static_cast<uint64_t>(getpid()) << 32 ^
         static_cast<uint64_t>(sys::monotonic_seconds() * 1e9);
  }
  return id == 0 ? 1 : id;
}

// Forks the command, stopped before exec until *go is written (so the trace file exists
// before the command runs). Returns its pid; *exec_errors gets a pipe that receives errno if
// exec fails (EOF once it succeeded).
Result<pid_t> start_command(const RunOptions& o, uint64_t run_id, int* go, int* exec_errors) {
  int go_pipe[2], err_pipe[2];
  if (pipe2(go_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(go_pipe[0]);
    ::close(go_pipe[1]);
    return Status::FromErrno("pipe", e);
  }
  std::vector<char*> argv;
  for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::string preload = o.interposer;
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && old[0] != '\0') {
    preload += std::string(":") + old;
  }
  const std::string id = std::to_string(run_id);
  pid_t pid = fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid == 0) {
    ::close(go_pipe[1]);
    ::close(err_pipe[0]);
    char byte;
    if (::read(go_pipe[0], &byte, 1) != 1) _exit(126);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv("NANOTRACE_RUN_ID", id.c_str(), 1);
    setenv("NANOTRACE_KEEP", "1", 1);
    setenv("NANOTRACE_MODE", "block", 0);
    execvp(argv[0], argv.data());
    int e = errno;
    (void)!::write(err_pipe[1], &e, sizeof(e));
    _exit(e == ENOENT ? 127 : 126);
  }
  ::close(go_pipe[0]);
  ::close(err_pipe[1]);
  *go = go_pipe[1];
  *exec_errors = err_pipe[0];
  return pid;
}

}  // namespace

Result<RunSummary> run_command(const RunOptions& o) {
  if (o.command.empty()) return Status::Invalid("no command to run");
  if (access(o.interposer.c_str(), R_OK) != 0) {
    return Status::Invalid("the I/O interposer " + o.interposer + " is missing");
  }
  const uint64_t run_id = new_run_id();
  int go = -1, exec_errors = -1;
  auto started = start_command(o, run_id, &go, &exec_errors);
  if (!started.ok()) return started.status();
  const pid_t child = *started;
  RunSummary summary;
  summary.pid = static_cast<uint32_t>(child);

  rec::FileWriter out;
  Status s = out.open(o.output, summary.pid, file::FileKind::kRecording, o.compress);
  if (!s.ok()) {
    ::close(go);  // the command never runs
    ::close(exec_errors);
    waitpid(child, nullptr, 0);
    return s;
  }
  // Kernel capture starts before the command runs, so its first I/O is seen.
  std::unique_ptr<rec::KernelRecording> kernel;
  if (!o.kernel.empty()) {
    const char* clock = std::getenv("NANOTRACE_CLOCK");  // the command's runtime reads it too
    const bool tsc = sys::tsc_is_invariant() && !(clock && std::strcmp(clock, "monotonic") == 0);
    std::string warning;
    auto k =
        rec::KernelRecording::start(o.kernel, o.kernel_buffer_kb, summary.pid, tsc, out, &warning);
    if (!k.ok()) {
      ::close(go);  // the command never runs
      ::close(exec_errors);
      waitpid(child, nullptr, 0);
      (void)out.close();
      ::unlink(o.output.c_str());
      return k.status();
    }
    kernel = std::move(*k);
    if (!warning.empty()) summary.warnings.push_back(warning);
  }
  const char byte = 1;
  (void)!::write(go, &byte, 1);
  ::close(go);
  int exec_errno = 0;
  ssize_t n = ::read(exec_errors, &exec_errno, sizeof(exec_errno));
  ::close(exec_errors);
  if (n == sizeof(exec_errno)) {
    waitpid(child, nullptr, 0);
    (void)out.close();
    ::unlink(o.output.c_str());
    if (exec_errno == ENOENT) return Status::NotFound(o.command[0] + ": command not found");
    return Status::FromErrno("cannot run " + o.command[0], exec_errno);
  }

  const double t0 = sys::monotonic_seconds();
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  rec::ProcessSession session(out);
  int status = 0;
  bool exited = false;
  double last_scan = 0;
  double last_follow = 0;
  size_t followed = 0;
  uint64_t idle_us = 50;
  double prev_pass = sys::monotonic_seconds();
  while (!exited) {
    if (o.forward_signal != nullptr) {
      if (int sig = o.forward_signal->exchange(0); sig != 0) kill(child, sig);
    }
    double now = sys::monotonic_seconds();
    if (now - last_scan >= 0.002) {
      last_scan = now;
      s = session.scan(run_id);
      if (!s.ok()) break;
    }
    uint64_t moved = 0;
    const double pass_start = sys::monotonic_seconds();
    s = session.pass(false, &moved);
    if (!s.ok()) break;
    if (kernel) {
      s = kernel->drain(/*final=*/false);
      if (!s.ok()) break;
      // The filters follow the processes found (and their threads, about every 0.2 s).
      const std::vector<RecordedProcess> found = session.processes();
      if (found.size() != followed || now - last_follow >= 0.2) {
        last_follow = now;
        for (; followed < found.size(); ++followed) kernel->follow(found[followed].pid);
        s = kernel->refresh_threads();
        if (!s.ok()) break;
      }
    }
    const double interval = pass_start - prev_pass;
    prev_pass = pass_start;
    pid_t w = waitpid(child, &status, WNOHANG);
    if (w == child) {
      exited = true;
      break;
    }
    if (session.writer_waiting()) {
      idle_us = 50;
      continue;  // a writer waits for room: go straight on
    }
    if (moved > 0) {
      // Not every 50 us while records flow: a recorder that polls that often takes a core
      // from the program on a small machine.
      idle_us = 50;
      const double wait =
          session.quarter_ring_s(interval) - (sys::monotonic_seconds() - pass_start);
      if (wait >= 20e-6) idle_us = static_cast<uint64_t>(wait * 1e6);
    } else {
      idle_us = idle_us * 2 > 5000 ? 5000 : idle_us * 2;
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      timespec ts{static_cast<time_t>(idle_us / 1000000),
                  static_cast<long>(idle_us % 1000000) * 1000};
      (void)ppoll(&p, 1, &ts, nullptr);
    } else {
      usleep(static_cast<useconds_t>(idle_us));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  if (!exited) {
    // Recording failed: the command still runs its course; its status is still ours.
    kill(child, SIGTERM);
    waitpid(child, &status, 0);
    return s;
  }
  // Everything the command's processes left: the last ones found, then one final pass.
  uint64_t moved = 0;
  s = session.scan(run_id);
  if (s.ok()) s = session.pass(true, &moved);
  if (s.ok() && kernel) s = kernel->drain(/*final=*/true);
  if (s.ok() && kernel) s = kernel->finish(&summary.kernel_pages, &summary.kernel_lost);
  if (s.ok()) {
    // With no process traced (a static or setuid command) the file holds no tables: the
    // caller says why.
    s = session.write_end(file::EndReason::kTargetExited);
  }
  if (s.ok()) s = out.close();
  if (!s.ok()) return s;

  if (WIFEXITED(status)) {
    summary.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    summary.killed_by = WTERMSIG(status);
    summary.exit_code = 128 + summary.killed_by;
    summary.core_dumped = WCOREDUMP(status);
  }
  summary.seconds = sys::monotonic_seconds() - t0;
  summary.processes = session.processes();
  summary.records = session.records();
  summary.file_bytes = out.bytes_written();
  for (const RecordedProcess& p : summary.processes) summary.lost += p.lost;
  return summary;
}

}  // namespace nanotrace
