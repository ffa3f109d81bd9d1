// Wrappers of the calls that create and retire descriptors: open, openat, creat (and their
// 64-bit and _FORTIFY_SOURCE entry points), close, dup, dup2, dup3. They keep the descriptor
// table (wrapper_state.cc) in step and write io_open:path once per successful open. They
// also keep the runtime's segment descriptor alive: a close of it (a daemon closing every
// descriptor, also through close_range or closefrom) is skipped, and a dup2 onto its number
// first moves it to another number. Also
// vfork, which runs as fork: a vfork child shares its parent's memory, and so its thread's
// ring, while its own calls (dup2, close before exec) would be recorded as the parent's.
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

#include "interpose/io_events.hpp"
#include "interpose/real_calls.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::interpose {
namespace {

NANOTRACE_REAL_SLOT(open);
NANOTRACE_REAL_SLOT(open64);
NANOTRACE_REAL_SLOT(__open_2);
NANOTRACE_REAL_SLOT(__open64_2);
NANOTRACE_REAL_SLOT(openat);
NANOTRACE_REAL_SLOT(openat64);
NANOTRACE_REAL_SLOT(__openat_2);
NANOTRACE_REAL_SLOT(__openat64_2);
NANOTRACE_REAL_SLOT(creat);
NANOTRACE_REAL_SLOT(creat64);
NANOTRACE_REAL_SLOT(close);
NANOTRACE_REAL_SLOT(dup);
NANOTRACE_REAL_SLOT(dup2);
NANOTRACE_REAL_SLOT(dup3);
NANOTRACE_REAL_SLOT(close_range);
NANOTRACE_REAL_SLOT(closefrom);

using OpenFn = int (*)(const char*, int, ...);
using Open2Fn = int (*)(const char*, int);
using OpenatFn = int (*)(int, const char*, int, ...);
using Openat2Fn = int (*)(int, const char*, int);
using CreatFn = int (*)(const char*, mode_t);
using CloseFn = int (*)(int);
using DupFn = int (*)(int);
using Dup2Fn = int (*)(int, int);
using Dup3Fn = int (*)(int, int, int);
using CloseRangeFn = int (*)(unsigned, unsigned, int);
using ClosefromFn = void (*)(int);

__attribute__((constructor)) void resolve_file_calls() {
  (void)NANOTRACE_REAL(OpenFn, open), (void)NANOTRACE_REAL(OpenFn, open64);
  (void)NANOTRACE_REAL(Open2Fn, __open_2), (void)NANOTRACE_REAL(Open2Fn, __open64_2);
  (void)NANOTRACE_REAL(OpenatFn, openat), (void)NANOTRACE_REAL(OpenatFn, openat64);
  (void)NANOTRACE_REAL(Openat2Fn, __openat_2), (void)NANOTRACE_REAL(Openat2Fn, __openat64_2);
  (void)NANOTRACE_REAL(CreatFn, creat), (void)NANOTRACE_REAL(CreatFn, creat64);
  (void)NANOTRACE_REAL(CloseFn, close), (void)NANOTRACE_REAL(DupFn, dup);
  (void)NANOTRACE_REAL(Dup2Fn, dup2), (void)NANOTRACE_REAL(Dup3Fn, dup3);
  (void)NANOTRACE_REAL(CloseRangeFn, close_range), (void)NANOTRACE_REAL(ClosefromFn, closefrom);
}

bool takes_mode(int flags) { return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE; }

template <class Call>
int traced_open(Op op, int dirfd, const char* path, int flags, mode_t mode, Call&& call) {
  if (passthrough()) return call();
  Scope scope;
  emit_open_begin(scope.call(), op, dirfd, flags, mode);
  int fd = call();
  const int saved = errno;
  // The path first: a reader of the end record then knows the file.
  if (fd >= 0) opened_fd(fd, dirfd, path);
  emit_open_end(scope.call(), op, fd, fd < 0 ? saved : 0);
  errno = saved;
  return fd;
}

template <class Call>
int traced_dup(Op op, int fd, int newfd, int flags, Call&& call) {
  if (passthrough()) return call();
  Scope scope;
  note_fd(fd);
  emit_dup_begin(scope.call(), op, fd, newfd, flags);
  int result = call();
  const int saved = errno;
  emit_dup_end(scope.call(), op, fd, result, result < 0 ? saved : 0);
  if (result >= 0) replaced_fd(result);  // its path is written when it is next used
  errno = saved;
  return result;
}

// The descriptor of this process's segment: closing it would drop the segment's writer lock
// and let the program's next file take its number, which the runtime would then allocate
// rings in. A program that closes every descriptor it did not open (a daemon) gets success
// without the close.
bool is_runtime_fd(int fd) {
  runtime::Runtime& rt = runtime::Runtime::instance();
  return fd >= 0 && rt.started.load(std::memory_order_acquire) && fd == rt.segment.fd &&
         rt.pid == getpid() && !detail::t_runtime_io;
}

// The program is about to make newfd name another file: if newfd is the segment's
// descriptor, the segment moves to another number first (under the runtime's lock, which
// every user of the descriptor but a thread's first claim holds).
void move_runtime_fd_from(int newfd) {
  if (is_runtime_fd(newfd)) runtime::Runtime::instance().move_segment_fd_from(newfd);
}

}  // namespace
}  // namespace nanotrace::interpose

using namespace nanotrace::interpose;

// The mode argument of an open-like call, passed only when the flags create a file. A macro:
// va_start must run in the variadic function itself.
#define OPTIONAL_MODE(flags)              \
  ({                                      \
    mode_t optional_mode = 0;             \
    if (takes_mode(flags)) {              \
      va_list ap;                         \
      va_start(ap, flags);                \
      optional_mode = va_arg(ap, mode_t); \
      va_end(ap);                         \
    }                                     \
    optional_mode;                        \
  })

extern "C" {

int open(const char* path, int flags, ...) {
  const mode_t mode = OPTIONAL_MODE(flags);
  return traced_open(Op::kOpen, AT_FDCWD, path, flags, mode,
                     [&] { return NANOTRACE_REAL(OpenFn, open)(path, flags, mode); });
}
int open64(const char* path, int flags, ...) {
  const mode_t mode = OPTIONAL_MODE(flags);
  return traced_open(Op::kOpen, AT_FDCWD, path, flags, mode,
                     [&] { return NANOTRACE_REAL(OpenFn, open64)(path, flags, mode); });
}
int __open_2(const char* path, int flags) {
  return traced_open(Op::kOpen, AT_FDCWD, path, flags, 0,
                     [&] { return NANOTRACE_REAL(Open2Fn, __open_2)(path, flags); });
}
int __open64_2(const char* path, int flags) {
  return traced_open(Op::kOpen, AT_FDCWD, path, flags, 0,
                     [&] { return NANOTRACE_REAL(Open2Fn, __open64_2)(path, flags); });
}
int openat(int dirfd, const char* path, int flags, ...) {
  const mode_t mode = OPTIONAL_MODE(flags);
  return traced_open(Op::kOpenat, dirfd, path, flags, mode,
                     [&] { return NANOTRACE_REAL(OpenatFn, openat)(dirfd, path, flags, mode); });
}
int openat64(int dirfd, const char* path, int flags, ...) {
  const mode_t mode = OPTIONAL_MODE(flags);
  return traced_open(Op::kOpenat, dirfd, path, flags, mode,
                     [&] { return NANOTRACE_REAL(OpenatFn, openat64)(dirfd, path, flags, mode); });
}
int __openat_2(int dirfd, const char* path, int flags) {
  return traced_open(Op::kOpenat, dirfd, path, flags, 0,
                     [&] { return NANOTRACE_REAL(Openat2Fn, __openat_2)(dirfd, path, flags); });
}
int __openat64_2(int dirfd, const char* path, int flags) {
  return traced_open(Op::kOpenat, dirfd, path, flags, 0,
                     [&] { return NANOTRACE_REAL(Openat2Fn, __openat64_2)(dirfd, path, flags); });
}
int creat(const char* path, mode_t mode) {
  return traced_open(Op::kCreat, AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode,
                     [&] { return NANOTRACE_REAL(CreatFn, creat)(path, mode); });
}
int creat64(const char* path, mode_t mode) {
  return traced_open(Op::kCreat, AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode,
                     [&] { return NANOTRACE_REAL(CreatFn, creat64)(path, mode); });
}

int close(int fd) {
  auto real = NANOTRACE_REAL(CloseFn, close);
  if (passthrough()) return is_runtime_fd(fd) ? 0 : real(fd);
  Scope scope;
  emit_close_begin(scope.call(), fd);  // may create the segment (a fork child's first record)
  int result = is_runtime_fd(fd) ? 0 : real(fd);
  const int saved = errno;
  // The descriptor is gone even when close reports an error (EINTR, EIO).
  if (result == 0 || saved != EBADF) closed_fd(fd);
  emit_close_end(scope.call(), fd, result, result < 0 ? saved : 0);
  errno = saved;
  return result;
}

int dup(int fd) noexcept {
  return traced_dup(Op::kDup, fd, -1, 0, [&] { return NANOTRACE_REAL(DupFn, dup)(fd); });
}
// The move happens after the begin record, which may have created the segment.
int dup2(int fd, int newfd) noexcept {
  return traced_dup(Op::kDup2, fd, newfd, 0, [&] {
    if (fd != newfd) move_runtime_fd_from(newfd);
    return NANOTRACE_REAL(Dup2Fn, dup2)(fd, newfd);
  });
}
int dup3(int fd, int newfd, int flags) noexcept {
  return traced_dup(Op::kDup3, fd, newfd, flags, [&] {
    move_runtime_fd_from(newfd);
    return NANOTRACE_REAL(Dup3Fn, dup3)(fd, newfd, flags);
  });
}

// The range without the segment's descriptor.
int close_range(unsigned first, unsigned last, int flags) noexcept {
  auto real = NANOTRACE_REAL(CloseRangeFn, close_range);
  const int fd = nanotrace::runtime::Runtime::instance().segment.fd;
  if (!is_runtime_fd(fd) || static_cast<unsigned>(fd) < first || static_cast<unsigned>(fd) > last) {
    return real(first, last, flags);
  }
  int a = static_cast<unsigned>(fd) > first ? real(first, fd - 1, flags) : 0;
  int b = static_cast<unsigned>(fd) < last ? real(fd + 1, last, flags) : 0;
  return a != 0 ? a : b;
}
void closefrom(int lowfd) noexcept {
  if (lowfd < 0) lowfd = 0;
  if (close_range(static_cast<unsigned>(lowfd), ~0u, 0) != 0) {
    NANOTRACE_REAL(ClosefromFn, closefrom)(lowfd);  // old kernel: the C library's fallback
  }
}

pid_t vfork() noexcept { return fork(); }

}  // extern "C"
