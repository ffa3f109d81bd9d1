// `nanotrace run`: the drain source (drain_source.hpp) of a command's process tree. It starts
// the command with the I/O interposer preloaded; the recording loop records every process
// image the command and its descendants start into one trace file (docs/format.md: several
// processes), until the command exits; then `run` exits with the command's status.
//
// Finding the processes: the command's environment carries NANOTRACE_RUN_ID (a random number
// for this session), which every descendant inherits and whose runtime writes it into its
// segment header; poll() scans /dev/shm for segments with that id. NANOTRACE_KEEP=1 keeps a
// segment after its process exits (and an exec'd image's segment, set aside), so a process
// shorter than a scan interval is still found; the session removes each segment once it has
// taken everything from it. NANOTRACE_MODE=block (unless the caller chose a mode) makes a
// writer wait for the recorder rather than drop, also before the scan has found its process
// (a runtime with NANOTRACE_RUN_ID waits for its first consumer, within the block timeout).
//
// A recording that ends before the command (--stop-on) lets the command run its course: its
// processes are no longer consumed (block mode waits for nobody), run waits for the command
// (still passing signals on), and removes the segments the run's processes left behind.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/clock.hpp"
#include "base/process.hpp"
#include "nanotrace/record.hpp"
#include "reader/trace_internals.hpp"
#include "record/recording_loop.hpp"

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

// In the forked child: waits for the go byte, then execs the command traced. Never returns.
[[noreturn]] void exec_command(char* const* argv, const std::string& preload,
                               const std::string& run_id, int go, int exec_errors) {
  char byte;
  if (::read(go, &byte, 1) != 1) _exit(126);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("NANOTRACE_RUN_ID", run_id.c_str(), 1);
  setenv("NANOTRACE_KEEP", "1", 1);
  setenv("NANOTRACE_MODE", "block", 0);
  execvp(argv[0], argv);
  int e = errno;
  (void)!::write(exec_errors, &e, sizeof(e));
  _exit(e == ENOENT ? 127 : 126);
}

class CommandSource final : public rec::DrainSource {
 public:
  // Forks the command, held before exec until start() (so that the trace file and the kernel
  // capture exist before the command runs).
  static Result<std::unique_ptr<CommandSource>> fork_command(const RunOptions& o);
  ~CommandSource() override;

  std::vector<const Trace*> initial_processes() const override { return {}; }
  uint32_t file_pid() const override { return static_cast<uint32_t>(child_); }
  bool tsc_clock() const override {
    const char* clock = std::getenv("NANOTRACE_CLOCK");  // the command's runtime reads it too
    return sys::tsc_is_invariant() && !(clock && std::strcmp(clock, "monotonic") == 0);
  }
  bool several() const override { return true; }
  Status start(rec::ProcessSession& session) override;
  Status poll(rec::ProcessSession& session, rec::SourceAsks* asks) override;
  bool ended(const rec::ProcessSession&) override { return reap(WNOHANG); }
  int wake_fd() const override { return pidfd_; }
  Status finish(rec::ProcessSession& session, file::EndReason reason) override {
    // Everything the command's processes left: the last ones found, for the final pass.
    return reason == file::EndReason::kTargetExited ? scan(session) : Status::Ok();
  }

  // After the recording: waits for the command to exit (passing signals on), then removes
  // the segments the run's processes kept that nobody will take. Returns its wait status.
  int wait_command();
  // The recording failed: the command is stopped (SIGTERM, or never let go) and waited for.
  int stop_command();
  bool exec_failed() const { return exec_failed_; }

 private:
  CommandSource(const RunOptions& o, uint64_t run_id) : options_(o), run_id_(run_id) {}
  Status scan(rec::ProcessSession& session);
  bool reap(int flags);
  void forward_signal();
  void remove_leftover_segments() const;

  const RunOptions& options_;
  uint64_t run_id_;
  pid_t child_ = -1;
  int pidfd_ = -1;
  int go_ = -1;           // written once by start(); -1 after
  int exec_errors_ = -1;  // receives exec's errno, EOF once exec succeeded
  bool exec_failed_ = false;
  bool exited_ = false;
  int status_ = 0;
  double last_scan_ = 0;
};

Result<std::unique_ptr<CommandSource>> CommandSource::fork_command(const RunOptions& o) {
  std::unique_ptr<CommandSource> c(new CommandSource(o, new_run_id()));
  int go_pipe[2], err_pipe[2];
  if (pipe2(go_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(go_pipe[0]);
    ::close(go_pipe[1]);
    return Status::FromErrno("pipe", e);
  }
  std::string preload = o.interposer;
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && old[0] != '\0') {
    preload += std::string(":") + old;
  }
  const std::string id = std::to_string(c->run_id_);
  std::vector<char*> argv;  // built before fork: the child only execs
  for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  c->child_ = fork();
  if (c->child_ == 0) {
    ::close(go_pipe[1]);
    ::close(err_pipe[0]);
    exec_command(argv.data(), preload, id, go_pipe[0], err_pipe[1]);
  }
  const int e = errno;
  ::close(go_pipe[0]);
  ::close(err_pipe[1]);
  c->go_ = go_pipe[1];
  c->exec_errors_ = err_pipe[0];
  if (c->child_ < 0) return Status::FromErrno("fork", e);
  c->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, c->child_, 0));
  return c;
}

CommandSource::~CommandSource() {
  if (go_ >= 0) ::close(go_);  // never let go: the command exits without running
  if (exec_errors_ >= 0) ::close(exec_errors_);
  if (pidfd_ >= 0) ::close(pidfd_);
  if (child_ > 0 && !exited_) reap(0);
}

Status CommandSource::start(rec::ProcessSession&) {
  const char byte = 1;
  (void)!::write(go_, &byte, 1);
  ::close(go_);
  go_ = -1;
  int exec_errno = 0;
  const ssize_t n = ::read(exec_errors_, &exec_errno, sizeof(exec_errno));
  ::close(exec_errors_);
  exec_errors_ = -1;
  if (n != sizeof(exec_errno)) return Status::Ok();
  exec_failed_ = true;
  reap(0);
  if (exec_errno == ENOENT) return Status::NotFound(options_.command[0] + ": command not found");
  return Status::FromErrno("cannot run " + options_.command[0], exec_errno);
}

Status CommandSource::poll(rec::ProcessSession& session, rec::SourceAsks*) {
  forward_signal();
  const double now = sys::monotonic_seconds();
  if (now - last_scan_ < 0.002) return Status::Ok();
  last_scan_ = now;
  return scan(session);
}

Status CommandSource::scan(rec::ProcessSession& session) {
  return session.scan([this](const abi::SegmentHeader& h) { return h.run_id == run_id_; },
                      /*owned=*/true);
}

bool CommandSource::reap(int flags) {
  if (exited_) return true;
  if (waitpid(child_, &status_, flags) == child_) exited_ = true;
  return exited_;
}

void CommandSource::forward_signal() {
  if (options_.forward_signal == nullptr) return;
  if (int sig = options_.forward_signal->exchange(0); sig != 0 && !exited_) kill(child_, sig);
}

int CommandSource::wait_command() {
  while (!reap(WNOHANG)) {
    forward_signal();
    pollfd p{pidfd_, POLLIN, 0};
    if (pidfd_ < 0 || ::poll(&p, 1, 50) < 0) usleep(50000);
  }
  remove_leftover_segments();
  return status_;
}

int CommandSource::stop_command() {
  if (go_ >= 0) {
    ::close(go_);  // never let go: it exits without running the command
    go_ = -1;
  } else if (!exited_) {
    kill(child_, SIGTERM);
  }
  reap(0);
  return status_;
}

// The segments of this run whose processes are gone: kept for a recorder (NANOTRACE_KEEP)
// that stopped taking them.
void CommandSource::remove_leftover_segments() const {
  for (const sys::SegmentName& name : sys::list_segment_names()) {
    auto t = Trace::open_path(name.path, /*writable=*/false);
    if (!t.ok()) continue;
    auto* h = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(**t));
    if (h->run_id != run_id_) continue;
    if (!sys::segment_byte_locked(reader::TraceInternals::fd(**t), sys::kWriterLockByte)) {
      ::unlink(name.path.c_str());
    }
  }
}

RecordOptions record_options_of(const RunOptions& o) {
  RecordOptions r;
  r.output = o.output;
  r.compress = o.compress;
  r.kernel = o.kernel;
  r.kernel_buffer_kb = o.kernel_buffer_kb;
  r.kernel_flight_buffer_kb = o.kernel_flight_buffer_kb;
  r.stop_on = o.stop_on;
  r.snapshot_on = o.snapshot_on;
  r.progress = o.progress;
  return r;
}

RunSummary run_summary(const RecordSummary& r, pid_t child, int status) {
  RunSummary s;
  s.pid = static_cast<uint32_t>(child);
  if (WIFEXITED(status)) {
    s.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    s.killed_by = WTERMSIG(status);
    s.exit_code = 128 + s.killed_by;
    s.core_dumped = WCOREDUMP(status);
  }
  s.reason = r.reason;
  s.seconds = r.seconds;
  s.records = r.records;
  s.file_bytes = r.file_bytes;
  s.lost = r.lost();
  s.processes = r.processes;
  s.warnings = r.warnings;
  s.kernel_pages = r.kernel_pages;
  s.kernel_lost = r.kernel_lost;
  s.stop_match = r.stop_match;
  s.trigger_counts = r.trigger_counts;
  s.snapshots = r.snapshots;
  s.snapshot_kernel = r.snapshot_kernel;
  return s;
}

}  // namespace

Result<RunSummary> run_command(const RunOptions& o) {
  if (o.command.empty()) return Status::Invalid("no command to run");
  if (access(o.interposer.c_str(), R_OK) != 0) {
    return Status::Invalid("the I/O interposer " + o.interposer + " is missing");
  }
  const RecordOptions options = record_options_of(o);
  if (Status s = rec::check_record_options(options); !s.ok()) return s;
  auto source = CommandSource::fork_command(o);
  if (!source.ok()) return source.status();
  CommandSource& command = **source;
  auto recorded = rec::record_source(command, options);
  if (!recorded.ok()) {
    if (command.exec_failed()) {
      rec::discard_output(o.output);  // the command never ran: no trace of it
    } else {
      command.stop_command();  // the recording failed: the command's status is still ours
    }
    return recorded.status();
  }
  const int status = command.wait_command();
  return run_summary(*recorded, static_cast<pid_t>(command.file_pid()), status);
}

}  // namespace nanotrace
