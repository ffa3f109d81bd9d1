// The interposer's events and the state its wrappers share (internal header of
// libnanotrace_io.so, the I/O interposer).
//
// Every wrapped call is a begin record and an end record of its group, paired by `call` (a
// number unique within the process image) and naming the call in `op`:
//   GROUP:begin  call op fd offset bytes        (offset -1: the file position)
//   GROUP:end    call op fd result errno
// io_read, io_write, io_sync (fsync, fdatasync, sync_file_range), io_space (fallocate,
// ftruncate) and io_copy (copy_file_range, sendfile, splice: fd is the source, fd_out the
// destination) use these two shapes (io_copy's begin adds fd_out and offset_out). io_open
// has its own shapes (open, close, dup) and `io_open:path fd path ...`, written once when
// an open succeeds and the first time a descriptor the process did not open through us
// (inherited across fork or exec, opened before tracing started) is used. io_uring and
// io_aio describe each submitted request (sqe, iocb) and each completion seen (cqe, event).
//
// Thread safety: the wrappers run on any thread and in signal handlers; the state here is
// per thread or atomic.
#pragma once

#include <cstdint>

#include "nanotrace/enum.hpp"

namespace nanotrace::interpose {

enum class Op : uint8_t {
  kRead,
  kPread,
  kReadv,
  kPreadv,
  kPreadv2,
  kWrite,
  kPwrite,
  kWritev,
  kPwritev,
  kPwritev2,
  kOpen,
  kOpenat,
  kCreat,
  kClose,
  kDup,
  kDup2,
  kDup3,
  kFsync,
  kFdatasync,
  kSyncFileRange,
  kFallocate,
  kFtruncate,
  kCopyFileRange,
  kSendfile,
  kSplice,
  kUringSetup,
  kUringEnter,
  kIoSubmit,
  kIoGetevents,
};
NANOTRACE_ENUM(Op, {Op::kRead, "read"}, {Op::kPread, "pread"}, {Op::kReadv, "readv"},
               {Op::kPreadv, "preadv"}, {Op::kPreadv2, "preadv2"}, {Op::kWrite, "write"},
               {Op::kPwrite, "pwrite"}, {Op::kWritev, "writev"}, {Op::kPwritev, "pwritev"},
               {Op::kPwritev2, "pwritev2"}, {Op::kOpen, "open"}, {Op::kOpenat, "openat"},
               {Op::kCreat, "creat"}, {Op::kClose, "close"}, {Op::kDup, "dup"}, {Op::kDup2, "dup2"},
               {Op::kDup3, "dup3"}, {Op::kFsync, "fsync"}, {Op::kFdatasync, "fdatasync"},
               {Op::kSyncFileRange, "sync_file_range"}, {Op::kFallocate, "fallocate"},
               {Op::kFtruncate, "ftruncate"}, {Op::kCopyFileRange, "copy_file_range"},
               {Op::kSendfile, "sendfile"}, {Op::kSplice, "splice"},
               {Op::kUringSetup, "io_uring_setup"}, {Op::kUringEnter, "io_uring_enter"},
               {Op::kIoSubmit, "io_submit"}, {Op::kIoGetevents, "io_getevents"});

// Operation of one asynchronous request (an SQE or an iocb), as the summary groups them.
enum class AsyncOp : uint8_t { kOther, kRead, kWrite, kFsync, kFdatasync };
NANOTRACE_ENUM(AsyncOp, {AsyncOp::kOther, "other"}, {AsyncOp::kRead, "read"},
               {AsyncOp::kWrite, "write"}, {AsyncOp::kFsync, "fsync"},
               {AsyncOp::kFdatasync, "fdatasync"});

enum class Group : uint8_t { kRead, kWrite, kSync, kSpace };

// True while this thread writes a record: I/O then is the runtime's (its slow path), and a
// signal handler interrupting the record goes straight through as well.
extern thread_local bool t_emitting __attribute__((tls_model("initial-exec")));
struct EmitGuard {
  bool was = t_emitting;
  EmitGuard() noexcept { t_emitting = true; }
  ~EmitGuard() { t_emitting = was; }
};

// True when a wrapper must call straight through: before the interposer is initialised,
// while this thread writes a record, or on a thread doing the runtime's own work. (A signal
// handler that interrupts a wrapper's real call is traced like any other code.)
bool passthrough() noexcept;

// Numbers a call (unique within the process image).
class Scope {
 public:
  Scope() noexcept;
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  uint64_t call() const { return call_; }

 private:
  uint64_t call_;
};

// Descriptor table: whether the trace already says which file fd names.
// Writes io_open:path for fd unless already written (reads /proc/self/fd/N).
void note_fd(int fd) noexcept;
// fd was just opened on path (path relative to dirfd; AT_FDCWD for the working directory).
void opened_fd(int fd, int dirfd, const char* path) noexcept;
void closed_fd(int fd) noexcept;
// fd now names another file (dup2 onto it): forget what the trace says about it.
void replaced_fd(int fd) noexcept;

// Records (io_events.cc).
void emit_begin(Group group, uint64_t call, Op op, int fd, int64_t offset, uint64_t bytes) noexcept;
void emit_end(Group group, uint64_t call, Op op, int fd, int64_t result, int err) noexcept;
void emit_copy_begin(uint64_t call, Op op, int fd, int fd_out, int64_t offset, int64_t offset_out,
                     uint64_t bytes) noexcept;
void emit_copy_end(uint64_t call, Op op, int fd, int64_t result, int err) noexcept;
void emit_open_begin(uint64_t call, Op op, int dirfd, int flags, uint32_t mode) noexcept;
void emit_open_end(uint64_t call, Op op, int fd, int err) noexcept;
void emit_path(int fd, const char* path) noexcept;
void emit_close_begin(uint64_t call, int fd) noexcept;
void emit_close_end(uint64_t call, int fd, int result, int err) noexcept;
void emit_dup_begin(uint64_t call, Op op, int fd, int newfd, int flags) noexcept;
void emit_dup_end(uint64_t call, Op op, int fd, int result, int err) noexcept;
void emit_uring_setup_begin(uint64_t call, uint32_t entries, uint32_t flags) noexcept;
void emit_uring_setup_end(uint64_t call, int fd, int err) noexcept;
void emit_uring_enter_begin(uint64_t call, int fd, uint32_t to_submit, uint32_t min_complete,
                            uint32_t flags) noexcept;
void emit_uring_enter_end(uint64_t call, int fd, int64_t result, int err) noexcept;
void emit_sqe(int ring, int fd, uint8_t opcode, AsyncOp op, int64_t offset, uint64_t bytes,
              uint64_t user_data) noexcept;
void emit_cqe(int ring, uint64_t user_data, int32_t res) noexcept;
void emit_cqe_lost(int ring, uint64_t count) noexcept;
void emit_ring_totals(int ring, uint32_t submitted, uint32_t completed, uint32_t sq_dropped,
                      uint32_t cq_overflow) noexcept;
void emit_aio_submit_begin(uint64_t call, uint64_t ctx, int64_t nr) noexcept;
void emit_aio_submit_end(uint64_t call, int64_t result, int err) noexcept;
void emit_iocb(uint64_t ctx, uint64_t obj, int fd, uint16_t opcode, AsyncOp op, int64_t offset,
               uint64_t bytes) noexcept;
void emit_aio_getevents_begin(uint64_t call, uint64_t ctx, int64_t min_nr, int64_t nr) noexcept;
void emit_aio_getevents_end(uint64_t call, int64_t result, int err) noexcept;
void emit_aio_event(uint64_t ctx, uint64_t obj, int64_t res) noexcept;

}  // namespace nanotrace::interpose
