// The interposer's tracepoints: one begin and one end call site per group, so that
// NANOTRACE_GROUPS selects families of calls (io_read, io_write, io_open, io_sync, io_space,
// io_copy, io_uring, io_aio) and every wrapper of a family shares its sites.
#include "interpose/io_events.hpp"

#include <cstring>
#include <string_view>

#include "nanotrace/nanotrace.hpp"

namespace nanotrace::interpose {
namespace {

// Up to four pieces of a path, each at most abi::kMaxStringBytes and cut between UTF-8
// characters, so a path of up to about 250 bytes is recorded whole.
struct PathPieces {
  std::string_view part[4];
  explicit PathPieces(const char* path) {
    std::string_view rest = path ? std::string_view(path, ::strnlen(path, 4096)) : "";
    for (auto& p : part) {
      size_t n = rest.size() < abi::kMaxStringBytes ? rest.size() : abi::kMaxStringBytes;
      while (n < rest.size() && n > 0 && (static_cast<unsigned char>(rest[n]) & 0xc0) == 0x80) --n;
      p = rest.substr(0, n);
      rest.remove_prefix(n);
    }
  }
};

}  // namespace

void emit_begin(Group group, uint64_t call, Op op, int fd, int64_t offset,
                uint64_t bytes) noexcept {
  EmitGuard guard;
  switch (group) {
    case Group::kRead:
      NANOTRACE(io_read, begin, "call={} op={} fd={} offset={} bytes={}", call, op, fd, offset,
                bytes);
      break;
    case Group::kWrite:
      NANOTRACE(io_write, begin, "call={} op={} fd={} offset={} bytes={}", call, op, fd, offset,
                bytes);
      break;
    case Group::kSync:
      NANOTRACE(io_sync, begin, "call={} op={} fd={} offset={} bytes={}", call, op, fd, offset,
                bytes);
      break;
    case Group::kSpace:
      NANOTRACE(io_space, begin, "call={} op={} fd={} offset={} bytes={}", call, op, fd, offset,
                bytes);
      break;
  }
}

void emit_end(Group group, uint64_t call, Op op, int fd, int64_t result, int err) noexcept {
  EmitGuard guard;
  switch (group) {
    case Group::kRead:
      NANOTRACE(io_read, end, "call={} op={} fd={} result={} errno={}", call, op, fd, result, err);
      break;
    case Group::kWrite:
      NANOTRACE(io_write, end, "call={} op={} fd={} result={} errno={}", call, op, fd, result, err);
      break;
    case Group::kSync:
      NANOTRACE(io_sync, end, "call={} op={} fd={} result={} errno={}", call, op, fd, result, err);
      break;
    case Group::kSpace:
      NANOTRACE(io_space, end, "call={} op={} fd={} result={} errno={}", call, op, fd, result, err);
      break;
  }
}

void emit_copy_begin(uint64_t call, Op op, int fd, int fd_out, int64_t offset, int64_t offset_out,
                     uint64_t bytes) noexcept {
  EmitGuard guard;
  NANOTRACE(io_copy, begin, "call={} op={} fd={} fd_out={} offset={} offset_out={} bytes={}", call,
            op, fd, fd_out, offset, offset_out, bytes);
}

void emit_copy_end(uint64_t call, Op op, int fd, int64_t result, int err) noexcept {
  EmitGuard guard;
  NANOTRACE(io_copy, end, "call={} op={} fd={} result={} errno={}", call, op, fd, result, err);
}

void emit_open_begin(uint64_t call, Op op, int dirfd, int flags, uint32_t mode) noexcept {
  EmitGuard guard;
  NANOTRACE(io_open, open_begin, "call={} op={} dirfd={} flags={} mode={}", call, op, dirfd, flags,
            mode);
}

void emit_open_end(uint64_t call, Op op, int fd, int err) noexcept {
  EmitGuard guard;
  NANOTRACE(io_open, open_end, "call={} op={} fd={} errno={}", call, op, fd, err);
}

void emit_path(int fd, const char* path) noexcept {
  EmitGuard guard;
  if (!NANOTRACE_ENABLED(io_open)) return;
  PathPieces p(path);
  NANOTRACE(io_open, path, "fd={} path={} path2={} path3={} path4={}", fd, p.part[0], p.part[1],
            p.part[2], p.part[3]);
}

void emit_close_begin(uint64_t call, int fd) noexcept {
  EmitGuard guard;
  NANOTRACE(io_open, close_begin, "call={} op={} fd={}", call, Op::kClose, fd);
}

void emit_close_end(uint64_t call, int fd, int result, int err) noexcept {
  EmitGuard guard;
  NANOTRACE(io_open, close_end, "call={} op={} fd={} result={} errno={}", call, Op::kClose, fd,
            result, err);
}

void emit_dup_begin(uint64_t call, Op op, int fd, int newfd, int flags) noexcept {
  EmitGuard guard;
  NANOTRACE(io_open, dup_begin, "call={} op={} fd={} newfd={} flags={}", call, op, fd, newfd,
            flags);
}

void emit_dup_end(uint64_t call, Op op, int fd, int result, int err) noexcept {
  EmitGuard guard;
  NANOTRACE(io_open, dup_end, "call={} op={} fd={} result={} errno={}", call, op, fd, result, err);
}

void emit_uring_setup_begin(uint64_t call, uint32_t entries, uint32_t flags) noexcept {
  EmitGuard guard;
  NANOTRACE(io_uring, setup_begin, "call={} op={} entries={} flags={}", call, Op::kUringSetup,
            entries, flags);
}

void emit_uring_setup_end(uint64_t call, int fd, int err) noexcept {
  EmitGuard guard;
  NANOTRACE(io_uring, setup_end, "call={} op={} fd={} errno={}", call, Op::kUringSetup, fd, err);
}

void emit_uring_enter_begin(uint64_t call, int fd, uint32_t to_submit, uint32_t min_complete,
                            uint32_t flags) noexcept {
  EmitGuard guard;
  NANOTRACE(io_uring, enter_begin, "call={} op={} fd={} to_submit={} min_complete={} flags={}",
            call, Op::kUringEnter, fd, to_submit, min_complete, flags);
}

void emit_uring_enter_end(uint64_t call, int fd, int64_t result, int err) noexcept {
  EmitGuard guard;
  NANOTRACE(io_uring, enter_end, "call={} op={} fd={} result={} errno={}", call, Op::kUringEnter,
            fd, result, err);
}

void emit_sqe(int ring, int fd, uint8_t opcode, AsyncOp op, int64_t offset, uint64_t bytes,
              uint64_t user_data) noexcept {
  EmitGuard guard;
  NANOTRACE(io_uring, sqe, "ring={} fd={} opcode={} op={} offset={} bytes={} user_data={}", ring,
            fd, opcode, op, offset, bytes, user_data);
}

void emit_cqe(int ring, uint64_t user_data, int32_t res) noexcept {
  EmitGuard guard;
  NANOTRACE(io_uring, cqe, "ring={} user_data={} res={}", ring, user_data, res);
}

void emit_cqe_lost(int ring, uint64_t count) noexcept {
  EmitGuard guard;
  NANOTRACE(io_uring, cqe_lost, "ring={} count={}", ring, count);
}

void emit_ring_totals(int ring, uint32_t submitted, uint32_t completed, uint32_t sq_dropped,
                      uint32_t cq_overflow) noexcept {
  EmitGuard guard;
  NANOTRACE(io_uring, ring_totals, "ring={} submitted={} completed={} sq_dropped={} cq_overflow={}",
            ring, submitted, completed, sq_dropped, cq_overflow);
}

void emit_aio_submit_begin(uint64_t call, uint64_t ctx, int64_t nr) noexcept {
  EmitGuard guard;
  NANOTRACE(io_aio, submit_begin, "call={} op={} ctx={} nr={}", call, Op::kIoSubmit, ctx, nr);
}

void emit_aio_submit_end(uint64_t call, int64_t result, int err) noexcept {
  EmitGuard guard;
  NANOTRACE(io_aio, submit_end, "call={} op={} result={} errno={}", call, Op::kIoSubmit, result,
            err);
}

void emit_iocb(uint64_t ctx, uint64_t obj, int fd, uint16_t opcode, AsyncOp op, int64_t offset,
               uint64_t bytes) noexcept {
  EmitGuard guard;
  NANOTRACE(io_aio, iocb, "ctx={} obj={} fd={} opcode={} op={} offset={} bytes={}", ctx, obj, fd,
            opcode, op, offset, bytes);
}

void emit_aio_getevents_begin(uint64_t call, uint64_t ctx, int64_t min_nr, int64_t nr) noexcept {
  EmitGuard guard;
  NANOTRACE(io_aio, getevents_begin, "call={} op={} ctx={} min_nr={} nr={}", call, Op::kIoGetevents,
            ctx, min_nr, nr);
}

void emit_aio_getevents_end(uint64_t call, int64_t result, int err) noexcept {
  EmitGuard guard;
  NANOTRACE(io_aio, getevents_end, "call={} op={} result={} errno={}", call, Op::kIoGetevents,
            result, err);
}

void emit_aio_event(uint64_t ctx, uint64_t obj, int64_t res) noexcept {
  EmitGuard guard;
  NANOTRACE(io_aio, event, "ctx={} obj={} res={}", ctx, obj, res);
}

}  // namespace nanotrace::interpose
