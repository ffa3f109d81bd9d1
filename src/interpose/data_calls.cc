// Wrappers of the C library's data calls: read and write in every form (plain, positional,
// vectored, the 64-bit and v2 variants, and the _FORTIFY_SOURCE checking entry points that
// hardened programs call instead), fsync, fdatasync, sync_file_range, fallocate, ftruncate,
// copy_file_range, sendfile and splice. Each is a begin and an end record (io_events.hpp)
// around the real call; errno is what the real call left.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include "interpose/io_events.hpp"
#include "interpose/real_calls.hpp"

namespace nanotrace::interpose {
namespace {

NANOTRACE_REAL_SLOT(read);
NANOTRACE_REAL_SLOT(__read_chk);
NANOTRACE_REAL_SLOT(write);
NANOTRACE_REAL_SLOT(pread);
NANOTRACE_REAL_SLOT(pread64);
NANOTRACE_REAL_SLOT(__pread_chk);
NANOTRACE_REAL_SLOT(__pread64_chk);
NANOTRACE_REAL_SLOT(pwrite);
NANOTRACE_REAL_SLOT(pwrite64);
NANOTRACE_REAL_SLOT(readv);
NANOTRACE_REAL_SLOT(writev);
NANOTRACE_REAL_SLOT(preadv);
NANOTRACE_REAL_SLOT(preadv64);
NANOTRACE_REAL_SLOT(pwritev);
NANOTRACE_REAL_SLOT(pwritev64);
NANOTRACE_REAL_SLOT(preadv2);
NANOTRACE_REAL_SLOT(preadv64v2);
NANOTRACE_REAL_SLOT(pwritev2);
NANOTRACE_REAL_SLOT(pwritev64v2);
NANOTRACE_REAL_SLOT(fsync);
NANOTRACE_REAL_SLOT(fdatasync);
NANOTRACE_REAL_SLOT(sync_file_range);
NANOTRACE_REAL_SLOT(fallocate);
NANOTRACE_REAL_SLOT(fallocate64);
NANOTRACE_REAL_SLOT(ftruncate);
NANOTRACE_REAL_SLOT(ftruncate64);
NANOTRACE_REAL_SLOT(copy_file_range);
NANOTRACE_REAL_SLOT(sendfile);
NANOTRACE_REAL_SLOT(sendfile64);
NANOTRACE_REAL_SLOT(splice);

using ReadFn = ssize_t (*)(int, void*, size_t);
using ReadChkFn = ssize_t (*)(int, void*, size_t, size_t);
using WriteFn = ssize_t (*)(int, const void*, size_t);
using PreadFn = ssize_t (*)(int, void*, size_t, off_t);
using PreadChkFn = ssize_t (*)(int, void*, size_t, off_t, size_t);
using PwriteFn = ssize_t (*)(int, const void*, size_t, off_t);
using VecFn = ssize_t (*)(int, const struct iovec*, int);
using PvecFn = ssize_t (*)(int, const struct iovec*, int, off_t);
using Pvec2Fn = ssize_t (*)(int, const struct iovec*, int, off_t, int);
using SyncFn = int (*)(int);
using RangeFn = int (*)(int, off_t, off_t, unsigned int);
using FallocateFn = int (*)(int, int, off_t, off_t);
using TruncateFn = int (*)(int, off_t);
using CopyFn = ssize_t (*)(int, off_t*, int, off_t*, size_t, unsigned int);
using SendfileFn = ssize_t (*)(int, int, off_t*, size_t);
using SpliceFn = ssize_t (*)(int, off_t*, int, off_t*, size_t, unsigned int);

// Resolved at load time, so that no wrapper resolves in a signal handler.
__attribute__((constructor)) void resolve_data_calls() {
  (void)NANOTRACE_REAL(ReadFn, read), (void)NANOTRACE_REAL(WriteFn, write);
  (void)NANOTRACE_REAL(ReadChkFn, __read_chk);
  (void)NANOTRACE_REAL(PreadFn, pread), (void)NANOTRACE_REAL(PreadFn, pread64);
  (void)NANOTRACE_REAL(PreadChkFn, __pread_chk), (void)NANOTRACE_REAL(PreadChkFn, __pread64_chk);
  (void)NANOTRACE_REAL(PwriteFn, pwrite), (void)NANOTRACE_REAL(PwriteFn, pwrite64);
  (void)NANOTRACE_REAL(VecFn, readv), (void)NANOTRACE_REAL(VecFn, writev);
  (void)NANOTRACE_REAL(PvecFn, preadv), (void)NANOTRACE_REAL(PvecFn, preadv64);
  (void)NANOTRACE_REAL(PvecFn, pwritev), (void)NANOTRACE_REAL(PvecFn, pwritev64);
  (void)NANOTRACE_REAL(Pvec2Fn, preadv2), (void)NANOTRACE_REAL(Pvec2Fn, preadv64v2);
  (void)NANOTRACE_REAL(Pvec2Fn, pwritev2), (void)NANOTRACE_REAL(Pvec2Fn, pwritev64v2);
  (void)NANOTRACE_REAL(SyncFn, fsync), (void)NANOTRACE_REAL(SyncFn, fdatasync);
  (void)NANOTRACE_REAL(RangeFn, sync_file_range);
  (void)NANOTRACE_REAL(FallocateFn, fallocate), (void)NANOTRACE_REAL(FallocateFn, fallocate64);
  (void)NANOTRACE_REAL(TruncateFn, ftruncate), (void)NANOTRACE_REAL(TruncateFn, ftruncate64);
  (void)NANOTRACE_REAL(CopyFn, copy_file_range);
  (void)NANOTRACE_REAL(SendfileFn, sendfile), (void)NANOTRACE_REAL(SendfileFn, sendfile64);
  (void)NANOTRACE_REAL(SpliceFn, splice);
}

// Bytes an iovec array asks for. The array is read before the call, as the kernel reads
// it; a null or oversized one is left to the kernel to refuse.
uint64_t iov_bytes(const struct iovec* iov, int count) {
  if (iov == nullptr || count <= 0 || count > IOV_MAX) return 0;
  uint64_t n = 0;
  for (int i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

// The begin record, the real call, the end record; errno as the real call left it.
template <class Call>
auto traced(Group group, Op op, int fd, int64_t offset, uint64_t bytes, Call&& call) {
  Scope scope;
  note_fd(fd);
  emit_begin(group, scope.call(), op, fd, offset, bytes);
  auto result = call();
  const int saved = errno;
  emit_end(group, scope.call(), op, fd, static_cast<int64_t>(result), result < 0 ? saved : 0);
  errno = saved;
  return result;
}

template <class Call>
auto traced_copy(Op op, int fd_in, int fd_out, int64_t off_in, int64_t off_out, uint64_t bytes,
                 Call&& call) {
  Scope scope;
  note_fd(fd_in);
  note_fd(fd_out);
  emit_copy_begin(scope.call(), op, fd_in, fd_out, off_in, off_out, bytes);
  auto result = call();
  const int saved = errno;
  emit_copy_end(scope.call(), op, fd_in, static_cast<int64_t>(result), result < 0 ? saved : 0);
  errno = saved;
  return result;
}

int64_t offset_of(const off_t* p) { return p != nullptr ? static_cast<int64_t>(*p) : -1; }

}  // namespace
}  // namespace nanotrace::interpose

using nanotrace::interpose::Group;
using nanotrace::interpose::Op;
using nanotrace::interpose::passthrough;
using nanotrace::interpose::traced;
using namespace nanotrace::interpose;

#define NANOTRACE_WRAP(group, op, fd, offset, bytes, real_call)       \
  do {                                                                \
    if (passthrough()) return real_call;                              \
    return traced(group, op, fd, static_cast<int64_t>(offset), bytes, \
                  [&]() noexcept { return real_call; });              \
  } while (0)

extern "C" {

ssize_t read(int fd, void* buf, size_t n) {
  NANOTRACE_WRAP(Group::kRead, Op::kRead, fd, -1, n, NANOTRACE_REAL(ReadFn, read)(fd, buf, n));
}
ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  NANOTRACE_WRAP(Group::kRead, Op::kRead, fd, -1, n,
                 NANOTRACE_REAL(ReadChkFn, __read_chk)(fd, buf, n, buflen));
}
ssize_t write(int fd, const void* buf, size_t n) {
  NANOTRACE_WRAP(Group::kWrite, Op::kWrite, fd, -1, n, NANOTRACE_REAL(WriteFn, write)(fd, buf, n));
}
ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  NANOTRACE_WRAP(Group::kRead, Op::kPread, fd, off, n,
                 NANOTRACE_REAL(PreadFn, pread)(fd, buf, n, off));
}
ssize_t pread64(int fd, void* buf, size_t n, off_t off) {
  NANOTRACE_WRAP(Group::kRead, Op::kPread, fd, off, n,
                 NANOTRACE_REAL(PreadFn, pread64)(fd, buf, n, off));
}
ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  NANOTRACE_WRAP(Group::kRead, Op::kPread, fd, off, n,
                 NANOTRACE_REAL(PreadChkFn, __pread_chk)(fd, buf, n, off, buflen));
}
ssize_t __pread64_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  NANOTRACE_WRAP(Group::kRead, Op::kPread, fd, off, n,
                 NANOTRACE_REAL(PreadChkFn, __pread64_chk)(fd, buf, n, off, buflen));
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  NANOTRACE_WRAP(Group::kWrite, Op::kPwrite, fd, off, n,
                 NANOTRACE_REAL(PwriteFn, pwrite)(fd, buf, n, off));
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  NANOTRACE_WRAP(Group::kWrite, Op::kPwrite, fd, off, n,
                 NANOTRACE_REAL(PwriteFn, pwrite64)(fd, buf, n, off));
}
ssize_t readv(int fd, const struct iovec* iov, int count) {
  NANOTRACE_WRAP(Group::kRead, Op::kReadv, fd, -1, iov_bytes(iov, count),
                 NANOTRACE_REAL(VecFn, readv)(fd, iov, count));
}
ssize_t writev(int fd, const struct iovec* iov, int count) {
  NANOTRACE_WRAP(Group::kWrite, Op::kWritev, fd, -1, iov_bytes(iov, count),
                 NANOTRACE_REAL(VecFn, writev)(fd, iov, count));
}
ssize_t preadv(int fd, const struct iovec* iov, int count, off_t off) {
  NANOTRACE_WRAP(Group::kRead, Op::kPreadv, fd, off, iov_bytes(iov, count),
                 NANOTRACE_REAL(PvecFn, preadv)(fd, iov, count, off));
}
ssize_t preadv64(int fd, const struct iovec* iov, int count, off_t off) {
  NANOTRACE_WRAP(Group::kRead, Op::kPreadv, fd, off, iov_bytes(iov, count),
                 NANOTRACE_REAL(PvecFn, preadv64)(fd, iov, count, off));
}
ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t off) {
  NANOTRACE_WRAP(Group::kWrite, Op::kPwritev, fd, off, iov_bytes(iov, count),
                 NANOTRACE_REAL(PvecFn, pwritev)(fd, iov, count, off));
}
ssize_t pwritev64(int fd, const struct iovec* iov, int count, off_t off) {
  NANOTRACE_WRAP(Group::kWrite, Op::kPwritev, fd, off, iov_bytes(iov, count),
                 NANOTRACE_REAL(PvecFn, pwritev64)(fd, iov, count, off));
}
ssize_t preadv2(int fd, const struct iovec* iov, int count, off_t off, int flags) {
  NANOTRACE_WRAP(Group::kRead, Op::kPreadv2, fd, off, iov_bytes(iov, count),
                 NANOTRACE_REAL(Pvec2Fn, preadv2)(fd, iov, count, off, flags));
}
ssize_t preadv64v2(int fd, const struct iovec* iov, int count, off_t off, int flags) {
  NANOTRACE_WRAP(Group::kRead, Op::kPreadv2, fd, off, iov_bytes(iov, count),
                 NANOTRACE_REAL(Pvec2Fn, preadv64v2)(fd, iov, count, off, flags));
}
ssize_t pwritev2(int fd, const struct iovec* iov, int count, off_t off, int flags) {
  NANOTRACE_WRAP(Group::kWrite, Op::kPwritev2, fd, off, iov_bytes(iov, count),
                 NANOTRACE_REAL(Pvec2Fn, pwritev2)(fd, iov, count, off, flags));
}
ssize_t pwritev64v2(int fd, const struct iovec* iov, int count, off_t off, int flags) {
  NANOTRACE_WRAP(Group::kWrite, Op::kPwritev2, fd, off, iov_bytes(iov, count),
                 NANOTRACE_REAL(Pvec2Fn, pwritev64v2)(fd, iov, count, off, flags));
}
int fsync(int fd) {
  NANOTRACE_WRAP(Group::kSync, Op::kFsync, fd, 0, 0, NANOTRACE_REAL(SyncFn, fsync)(fd));
}
int fdatasync(int fd) {
  NANOTRACE_WRAP(Group::kSync, Op::kFdatasync, fd, 0, 0, NANOTRACE_REAL(SyncFn, fdatasync)(fd));
}
int sync_file_range(int fd, off_t off, off_t n, unsigned int flags) {
  NANOTRACE_WRAP(Group::kSync, Op::kSyncFileRange, fd, off, static_cast<uint64_t>(n),
                 NANOTRACE_REAL(RangeFn, sync_file_range)(fd, off, n, flags));
}
int fallocate(int fd, int mode, off_t off, off_t n) {
  NANOTRACE_WRAP(Group::kSpace, Op::kFallocate, fd, off, static_cast<uint64_t>(n),
                 NANOTRACE_REAL(FallocateFn, fallocate)(fd, mode, off, n));
}
int fallocate64(int fd, int mode, off_t off, off_t n) {
  NANOTRACE_WRAP(Group::kSpace, Op::kFallocate, fd, off, static_cast<uint64_t>(n),
                 NANOTRACE_REAL(FallocateFn, fallocate64)(fd, mode, off, n));
}
int ftruncate(int fd, off_t n) noexcept {
  NANOTRACE_WRAP(Group::kSpace, Op::kFtruncate, fd, 0, static_cast<uint64_t>(n),
                 NANOTRACE_REAL(TruncateFn, ftruncate)(fd, n));
}
int ftruncate64(int fd, off_t n) noexcept {
  NANOTRACE_WRAP(Group::kSpace, Op::kFtruncate, fd, 0, static_cast<uint64_t>(n),
                 NANOTRACE_REAL(TruncateFn, ftruncate64)(fd, n));
}

ssize_t copy_file_range(int fd_in, off_t* off_in, int fd_out, off_t* off_out, size_t n,
                        unsigned int flags) {
  auto real = NANOTRACE_REAL(CopyFn, copy_file_range);
  if (passthrough()) return real(fd_in, off_in, fd_out, off_out, n, flags);
  return traced_copy(Op::kCopyFileRange, fd_in, fd_out, offset_of(off_in), offset_of(off_out), n,
                     [&]() noexcept { return real(fd_in, off_in, fd_out, off_out, n, flags); });
}
ssize_t sendfile(int fd_out, int fd_in, off_t* off, size_t n) noexcept {
  auto real = NANOTRACE_REAL(SendfileFn, sendfile);
  if (passthrough()) return real(fd_out, fd_in, off, n);
  return traced_copy(Op::kSendfile, fd_in, fd_out, offset_of(off), -1, n,
                     [&]() noexcept { return real(fd_out, fd_in, off, n); });
}
ssize_t sendfile64(int fd_out, int fd_in, off_t* off, size_t n) noexcept {
  auto real = NANOTRACE_REAL(SendfileFn, sendfile64);
  if (passthrough()) return real(fd_out, fd_in, off, n);
  return traced_copy(Op::kSendfile, fd_in, fd_out, offset_of(off), -1, n,
                     [&]() noexcept { return real(fd_out, fd_in, off, n); });
}
ssize_t splice(int fd_in, off_t* off_in, int fd_out, off_t* off_out, size_t n, unsigned int flags) {
  auto real = NANOTRACE_REAL(SpliceFn, splice);
  if (passthrough()) return real(fd_in, off_in, fd_out, off_out, n, flags);
  return traced_copy(Op::kSplice, fd_in, fd_out, offset_of(off_in), offset_of(off_out), n,
                     [&]() noexcept { return real(fd_in, off_in, fd_out, off_out, n, flags); });
}

}  // extern "C"
