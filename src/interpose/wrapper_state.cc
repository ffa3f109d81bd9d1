// What every wrapper of the interposer shares: whether to call straight through (not ready
// yet, nested, the runtime's own thread), call numbering, and the descriptor table that
// decides when the trace learns which file a descriptor names.
//
// The table keeps one byte per descriptor (the first 65536): whether this process image's
// trace already holds the descriptor's path. An open through a wrapper writes it at once;
// any other descriptor (inherited across fork or exec, opened by the C library internally or
// before tracing began) gets it from /proc/self/fd the first time a wrapper sees it. close
// forgets it, dup2 onto it forgets it, and a fork child forgets every one (its trace is its
// own segment). Descriptors closed on exec need nothing: the new image starts empty.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "interpose/io_events.hpp"
#include "nanotrace/nanotrace.hpp"

namespace nanotrace::interpose {
namespace {

constexpr int kFdTable = 1 << 16;
std::atomic<uint8_t> g_fd_known[kFdTable];
std::atomic<bool> g_ready{false};
std::atomic<uint64_t> g_next_thread{1};

thread_local uint64_t t_call_base __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_calls __attribute__((tls_model("initial-exec"))) = 0;

// In a fork child: its trace is its own segment, and its calls are numbered with its pid.
void after_fork_in_child() {
  for (auto& b : g_fd_known) b.store(0, std::memory_order_relaxed);
  t_call_base = 0;
}

// "/proc/self/fd/N" without snprintf (async-signal-safe).
void fd_link_path(int fd, char* out) {
  static constexpr char kPrefix[] = "/proc/self/fd/";
  std::memcpy(out, kPrefix, sizeof(kPrefix) - 1);
  char digits[12];
  int n = 0;
  unsigned v = static_cast<unsigned>(fd);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  char* p = out + sizeof(kPrefix) - 1;
  while (n > 0) *p++ = digits[--n];
  *p = '\0';
}

void write_path_from_proc(int fd) {
  char link[32];
  char path[4096];
  fd_link_path(fd, link);
  ssize_t n = ::readlink(link, path, sizeof(path) - 1);
  if (n < 0) return;
  path[n] = '\0';
  emit_path(fd, path);  // guarded there
}

__attribute__((constructor(65535))) void interposer_ready() {
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  g_ready.store(true, std::memory_order_release);
}

}  // namespace

thread_local bool t_emitting __attribute__((tls_model("initial-exec"))) = false;

bool passthrough() noexcept {
  return !g_ready.load(std::memory_order_relaxed) || t_emitting || detail::t_runtime_io;
}

// A call's number: the pid (bits 40-61), the thread's number in the process modulo 256
// (bits 32-39) and the thread's call count, so that calls of different processes (and of
// the threads of one) pair up under one key, as `nanotrace latency ... call` needs.
Scope::Scope() noexcept {
  if (__builtin_expect(t_call_base == 0, 0)) {
    const uint64_t thread = g_next_thread.fetch_add(1, std::memory_order_relaxed) & 0xff;
    t_call_base = (static_cast<uint64_t>(getpid()) & 0x3fffff) << 40 | thread << 32;
    t_calls = 0;
  }
  call_ = t_call_base + (++t_calls & 0xffffffff);
}

void note_fd(int fd) noexcept {
  if (fd < 0 || fd >= kFdTable) return;
  if (__builtin_expect(g_fd_known[fd].load(std::memory_order_relaxed) != 0, 1)) return;
  if (!NANOTRACE_ENABLED(io_open)) return;
  if (g_fd_known[fd].exchange(1, std::memory_order_relaxed) != 0) return;
  write_path_from_proc(fd);
}

void opened_fd(int fd, int dirfd, const char* path) noexcept {
  if (fd < 0 || !NANOTRACE_ENABLED(io_open)) return;
  if (fd < kFdTable) g_fd_known[fd].store(1, std::memory_order_relaxed);
  // A relative name is only meaningful with the working directory (or dirfd) of the moment.
  if (path != nullptr && path[0] == '/') {
    emit_path(fd, path);
  } else {
    (void)dirfd;
    write_path_from_proc(fd);
  }
}

void closed_fd(int fd) noexcept {
  if (fd >= 0 && fd < kFdTable) g_fd_known[fd].store(0, std::memory_order_relaxed);
}

void replaced_fd(int fd) noexcept { closed_fd(fd); }

}  // namespace nanotrace::interpose
