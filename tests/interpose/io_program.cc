// A program nobody instrumented, for the interposer tests: it makes every wrapped kind of call
// a known number of times, from several threads and from a signal handler, forks a child
// that closes every descriptor it did not open (as a daemon does) and still does I/O, and
// checks every result, so that a harmful interposer shows as a failure here.
//
//   io_program DIR EXIT_CODE   (prints "ok" and exits EXIT_CODE when every check passed)
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int g_failures = 0;
int g_signal_pipe[2];
std::atomic<int> g_handled{0};

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "io_program: %s failed: %s\n", what, std::strerror(errno));
    ++g_failures;
  }
}

void on_signal(int) {
  char c = 's';
  if (write(g_signal_pipe[1], &c, 1) == 1) g_handled.fetch_add(1);
}

constexpr int kThreads = 4;
constexpr int kThreadReads = 50;
constexpr int kSignals = 100;
constexpr int kSignalLoopReads = 1000;

struct ThreadArgs {
  int fd;
  int failures = 0;
};

void* reader_thread(void* p) {
  auto* a = static_cast<ThreadArgs*>(p);
  char buf[4096];
  for (int i = 0; i < kThreadReads; ++i) {
    if (pread(a->fd, buf, sizeof(buf), 4096 * (i % 8)) != 4096) ++a->failures;
  }
  return nullptr;
}

struct Signaller {
  pthread_t target;
  std::atomic<bool> done{false};
};

void* signaller_thread(void* p) {
  auto* s = static_cast<Signaller*>(p);
  for (int i = 0; i < kSignals; ++i) {
    pthread_kill(s->target, SIGUSR1);
    usleep(100);
  }
  s->done = true;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string dir = argv[1];
  const std::string data = dir + "/data", copy = dir + "/copy", child = dir + "/child";
  char block[4096];
  std::memset(block, 'x', sizeof(block));

  int fd = open(data.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  check(fd >= 0, "open");
  for (int i = 0; i < 8; ++i) check(pwrite(fd, block, 4096, 4096 * i) == 4096, "pwrite");
  check(fsync(fd) == 0, "fsync");
  check(fdatasync(fd) == 0, "fdatasync");
  for (int i = 0; i < 8; ++i) check(pread(fd, block, 4096, 4096 * i) == 4096, "pread");
  struct iovec iov[2] = {{block, 1024}, {block + 1024, 1024}};
  check(pwritev(fd, iov, 2, 32768) == 2048, "pwritev");
  check(preadv2(fd, iov, 2, 0, 0) == 2048, "preadv2");
  check(pwritev2(fd, iov, 2, 0, 0) == 2048, "pwritev2");
  check(lseek(fd, 0, SEEK_SET) == 0, "lseek");
  check(readv(fd, iov, 2) == 2048, "readv");
  check(writev(fd, iov, 2) == 2048, "writev");
  check(read(fd, block, 100) == 100, "read");
  check(write(fd, block, 100) == 100, "write");
  check(fallocate(fd, 0, 0, 65536) == 0, "fallocate");
  check(ftruncate(fd, 65536) == 0, "ftruncate");
  check(sync_file_range(fd, 0, 4096, SYNC_FILE_RANGE_WRITE) == 0, "sync_file_range");
  int out = open(copy.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  check(out >= 0, "open copy");
  off_t in_off = 0;
  check(copy_file_range(fd, &in_off, out, nullptr, 8192, 0) == 8192, "copy_file_range");
  in_off = 0;
  check(sendfile(out, fd, &in_off, 4096) == 4096, "sendfile");
  int pipe_fds[2];
  check(pipe(pipe_fds) == 0, "pipe");
  loff_t splice_off = 0;
  check(splice(fd, &splice_off, pipe_fds[1], nullptr, 4096, 0) == 4096, "splice");
  check(read(pipe_fds[0], block, 4096) == 4096, "read pipe");
  int d = dup(fd);
  check(d >= 0, "dup");
  check(dup2(fd, 100) == 100, "dup2");
  check(dup3(fd, 101, O_CLOEXEC) == 101, "dup3");
  check(pread(100, block, 4096, 0) == 4096, "pread through dup2");
  check(close(d) == 0 && close(100) == 0 && close(101) == 0 && close(out) == 0, "close");
  errno = 0;
  check(read(999, block, 1) == -1 && errno == EBADF, "read of a bad descriptor");

  // Threads.
  pthread_t threads[kThreads];
  ThreadArgs args[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    args[i].fd = fd;
    pthread_create(&threads[i], nullptr, reader_thread, &args[i]);
  }
  for (int i = 0; i < kThreads; ++i) {
    pthread_join(threads[i], nullptr);
    check(args[i].failures == 0, "pread in a thread");
  }

  // Signal handlers doing I/O, arriving while the main thread is inside wrapped calls.
  check(pipe(g_signal_pipe) == 0, "pipe");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  Signaller sig;
  sig.target = pthread_self();
  pthread_t signaller;
  pthread_create(&signaller, nullptr, signaller_thread, &sig);
  int loop_reads = 0;
  while (!sig.done || loop_reads < kSignalLoopReads) {
    check(pread(fd, block, 4096, 0) == 4096, "pread while signalled");
    ++loop_reads;
  }
  pthread_join(signaller, nullptr);
  // Pending signals of one kind merge: at most kSignals ran, each wrote its byte.
  char drained[kSignals];
  ssize_t got = read(g_signal_pipe[0], drained, sizeof(drained));
  check(g_handled > 0 && got == g_handled, "write in a signal handler");
  std::printf("loop_reads %d handled %d\n", loop_reads, g_handled.load());

  // A child that closes every descriptor it did not open, then does I/O of its own.
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 3; i < 1024; ++i) close(i);
    int c = open(child.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    bool ok = c >= 0;
    for (int i = 0; i < 5; ++i) ok = ok && write(c, "child", 5) == 5;
    closefrom(3);  // close_range: the other way a daemon closes everything
    c = open(child.c_str(), O_WRONLY | O_APPEND);
    ok = ok && c >= 3;
    ok = ok && dup2(c, 3) == 3 && dup2(c, 4) == 4;  // onto what may be the segment's number
    for (int i = 0; i < 5; ++i) ok = ok && write(3, "child", 5) == 5;
    ok = ok && close(c) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "child I/O after closing every descriptor");
  check(close(fd) == 0, "close data");
  if (g_failures != 0) return 1;
  std::printf("ok\n");
  return std::atoi(argv[2]);
}
