// Wrappers of the asynchronous interfaces: io_uring_setup and io_uring_enter (called through
// syscall(), as fio does, or through liburing's exported functions), mmap of a ring, and
// libaio's io_submit and io_getevents.
//
// io_uring requests never pass through a call of their own: the program writes SQEs into
// shared memory and the kernel posts CQEs there. So the interposer remembers each ring's
// layout (io_uring_setup's parameters, and where the program mapped the rings), and at
// io_uring_enter records one io_uring:sqe per request being submitted (read from the SQ ring
// before the kernel consumes it), and one io_uring:cqe per completion posted since it last
// looked (before and after the call). A CQE's time is therefore when the interposer saw it,
// at the latest when the program next enters the kernel. Rings polled by a kernel thread
// (SQPOLL) are not followed. A program that makes the io_uring_enter system call itself
// (fio 3.33 on x86-64, liburing built without the C library as Debian's is) never passes
// through a wrapper: for a ring set up through syscall() and mapped through mmap, the
// totals it submitted and completed are recorded when the program unmaps it
// (io_uring:ring_totals), but not the individual requests.
#include <errno.h>
#include <limits.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "interpose/io_events.hpp"
#include "interpose/real_calls.hpp"

namespace nanotrace::interpose {
namespace {

NANOTRACE_REAL_SLOT(syscall);
NANOTRACE_REAL_SLOT(mmap);
NANOTRACE_REAL_SLOT(mmap64);
NANOTRACE_REAL_SLOT(munmap);
NANOTRACE_REAL_SLOT(io_uring_setup);
NANOTRACE_REAL_SLOT(io_uring_enter);
NANOTRACE_REAL_SLOT(io_uring_enter2);
NANOTRACE_REAL_SLOT(io_submit);
NANOTRACE_REAL_SLOT(io_getevents);

using SyscallFn = long (*)(long, ...);
using MmapFn = void* (*)(void*, size_t, int, int, int, off_t);
using MunmapFn = int (*)(void*, size_t);
using UringSetupFn = int (*)(unsigned, struct io_uring_params*);
using UringEnterFn = int (*)(unsigned, unsigned, unsigned, unsigned, void*);
using UringEnter2Fn = int (*)(unsigned, unsigned, unsigned, unsigned, void*, size_t);
using IoSubmitFn = int (*)(void*, long, struct iocb**);
using IoGeteventsFn = int (*)(void*, long, long, struct io_event*, struct timespec*);

__attribute__((constructor)) void resolve_async_calls() {
  (void)NANOTRACE_REAL(SyscallFn, syscall), (void)NANOTRACE_REAL(MmapFn, mmap);
  (void)NANOTRACE_REAL(MmapFn, mmap64);
  (void)NANOTRACE_REAL(MunmapFn, munmap);
  // The libraries below are absent from most programs (then the wrappers are never called).
  (void)NANOTRACE_REAL(UringSetupFn, io_uring_setup);
  (void)NANOTRACE_REAL(UringEnterFn, io_uring_enter);
  (void)NANOTRACE_REAL(UringEnter2Fn, io_uring_enter2);
  (void)NANOTRACE_REAL(IoSubmitFn, io_submit);
  (void)NANOTRACE_REAL(IoGeteventsFn, io_getevents);
}

// One io_uring instance the program set up.
struct Ring {
  std::atomic<int> fd{-1};
  io_uring_params params{};
  std::atomic<uint8_t*> sq_ring{nullptr};
  std::atomic<uint8_t*> cq_ring{nullptr};
  std::atomic<uint8_t*> sqes{nullptr};
  std::atomic<bool> scanning{false};  // one thread reads the CQ ring at a time
  bool cq_started = false;
  uint32_t cq_seen = 0;  // CQ position up to which completions were recorded
};
constexpr int kRings = 256;
Ring g_rings[kRings];

Ring* find_ring(int fd) {
  if (fd < 0) return nullptr;
  for (Ring& r : g_rings) {
    if (r.fd.load(std::memory_order_acquire) == fd) return &r;
  }
  return nullptr;
}

void add_ring(int fd, const io_uring_params* p) {
  if (fd < 0 || p == nullptr) return;
  for (Ring& r : g_rings) {
    int expected = -1;
    if (!r.fd.compare_exchange_strong(expected, -2, std::memory_order_acq_rel)) continue;
    std::memcpy(&r.params, p, sizeof(r.params));
    r.sq_ring.store(nullptr, std::memory_order_relaxed);
    r.cq_ring.store(nullptr, std::memory_order_relaxed);
    r.sqes.store(nullptr, std::memory_order_relaxed);
    r.cq_started = false;
    r.fd.store(fd, std::memory_order_release);
    return;
  }
}

uint32_t load_u32(const uint8_t* base, uint32_t offset) {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(base + offset), __ATOMIC_ACQUIRE);
}

AsyncOp async_op_of(const io_uring_sqe& sqe) {
  switch (sqe.opcode) {
    case IORING_OP_READV:
    case IORING_OP_READ_FIXED:
    case IORING_OP_READ:
      return AsyncOp::kRead;
    case IORING_OP_WRITEV:
    case IORING_OP_WRITE_FIXED:
    case IORING_OP_WRITE:
      return AsyncOp::kWrite;
    case IORING_OP_FSYNC:
      return (sqe.fsync_flags & IORING_FSYNC_DATASYNC) ? AsyncOp::kFdatasync : AsyncOp::kFsync;
    default:
      return AsyncOp::kOther;
  }
}

uint64_t iov_total(uint64_t addr, uint64_t count) {
  auto* iov = reinterpret_cast<const struct iovec*>(addr);
  if (iov == nullptr || count > IOV_MAX) return 0;
  uint64_t n = 0;
  for (uint64_t i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

// Records the SQEs the program is about to submit: those between the kernel's head and the
// program's tail, at most to_submit.
void record_submissions(Ring& r, int fd, uint32_t to_submit) {
  const io_uring_params& p = r.params;
  uint8_t* sq = r.sq_ring.load(std::memory_order_acquire);
  uint8_t* sqes = r.sqes.load(std::memory_order_acquire);
  if (sq == nullptr || sqes == nullptr || (p.flags & IORING_SETUP_SQPOLL)) return;
  const uint32_t head = load_u32(sq, p.sq_off.head);
  const uint32_t tail = load_u32(sq, p.sq_off.tail);
  const uint32_t mask = load_u32(sq, p.sq_off.ring_mask);
  const auto* array = reinterpret_cast<const uint32_t*>(sq + p.sq_off.array);
  const size_t sqe_size = (p.flags & IORING_SETUP_SQE128) ? 128 : 64;
  uint32_t n = tail - head;
  if (n > to_submit) n = to_submit;
  if (n > p.sq_entries) n = p.sq_entries;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t index = array[(head + i) & mask];
    if (index >= p.sq_entries) continue;
    const auto& sqe = *reinterpret_cast<const io_uring_sqe*>(sqes + size_t{index} * sqe_size);
    const AsyncOp op = async_op_of(sqe);
    uint64_t bytes = sqe.len;
    if (sqe.opcode == IORING_OP_READV || sqe.opcode == IORING_OP_WRITEV) {
      bytes = iov_total(sqe.addr, sqe.len);
    }
    // A registered file is named by its index: recorded as -2 - index.
    const int target = (sqe.flags & IOSQE_FIXED_FILE) ? -2 - sqe.fd : sqe.fd;
    if (target >= 0) note_fd(target);
    emit_sqe(fd, target, sqe.opcode, op, static_cast<int64_t>(sqe.off), bytes, sqe.user_data);
  }
}

// Records the CQEs posted since the last look. The CQ ring holds cq_entries of them; if more
// than that were posted meanwhile, the oldest were reused and are counted as lost.
void record_completions(Ring& r, int fd) {
  const io_uring_params& p = r.params;
  uint8_t* cq = r.cq_ring.load(std::memory_order_acquire);
  if (cq == nullptr) return;
  if (r.scanning.exchange(true, std::memory_order_acquire)) return;  // another thread does it
  const uint32_t tail = load_u32(cq, p.cq_off.tail);
  if (!r.cq_started) {
    r.cq_seen = load_u32(cq, p.cq_off.head);
    r.cq_started = true;
  }
  const uint32_t mask = load_u32(cq, p.cq_off.ring_mask);
  const size_t cqe_size = (p.flags & IORING_SETUP_CQE32) ? 32 : 16;
  uint32_t n = tail - r.cq_seen;
  if (n > p.cq_entries) {
    emit_cqe_lost(fd, n - p.cq_entries);
    r.cq_seen = tail - p.cq_entries;
    n = p.cq_entries;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const auto& cqe = *reinterpret_cast<const io_uring_cqe*>(
        cq + p.cq_off.cqes + size_t{(r.cq_seen + i) & mask} * cqe_size);
    emit_cqe(fd, cqe.user_data, cqe.res);
  }
  r.cq_seen = tail;
  r.scanning.store(false, std::memory_order_release);
}

void note_ring_mapping(int fd, off_t offset, void* addr) {
  Ring* r = find_ring(fd);
  if (r == nullptr || addr == MAP_FAILED) return;
  auto* base = static_cast<uint8_t*>(addr);
  if (offset == IORING_OFF_SQ_RING) {
    r->sq_ring.store(base, std::memory_order_release);
    if (r->params.features & IORING_FEAT_SINGLE_MMAP) {
      r->cq_ring.store(base, std::memory_order_release);
    }
  } else if (offset == IORING_OFF_CQ_RING) {
    r->cq_ring.store(base, std::memory_order_release);
  } else if (offset == IORING_OFF_SQES) {
    r->sqes.store(base, std::memory_order_release);
  }
}

// Before the program unmaps a ring's SQ or CQ memory: what the ring carried in total (the
// SQ ring's tail counts every SQE the program queued, the CQ ring's tail every CQE posted).
void note_ring_unmap(void* addr) {
  auto* base = static_cast<uint8_t*>(addr);
  for (Ring& r : g_rings) {
    const int fd = r.fd.load(std::memory_order_acquire);
    if (fd < 0) continue;
    uint8_t* sq = r.sq_ring.load(std::memory_order_acquire);
    uint8_t* cq = r.cq_ring.load(std::memory_order_acquire);
    if (base != sq && base != cq) continue;
    if (sq != nullptr && cq != nullptr) {
      const io_uring_params& p = r.params;
      emit_ring_totals(fd, load_u32(sq, p.sq_off.tail), load_u32(cq, p.cq_off.tail),
                       load_u32(sq, p.sq_off.dropped), load_u32(cq, p.cq_off.overflow));
    }
    // The ring is going away: forget it (its fd number may name another ring later).
    r.sq_ring.store(nullptr, std::memory_order_release);
    r.cq_ring.store(nullptr, std::memory_order_release);
    r.fd.store(-1, std::memory_order_release);
    return;
  }
}

// io_uring_setup through any entry point; call returns the fd or a negative value.
template <class Call>
long traced_setup(uint32_t entries, io_uring_params* p, bool returns_errno, Call&& call) {
  Scope scope;
  emit_uring_setup_begin(scope.call(), entries, p != nullptr ? p->flags : 0);
  long fd = call();
  const int saved = errno;
  const int err = fd >= 0 ? 0 : returns_errno ? saved : static_cast<int>(-fd);
  emit_uring_setup_end(scope.call(), static_cast<int>(fd), err);
  if (fd >= 0) add_ring(static_cast<int>(fd), p);
  errno = saved;
  return fd;
}

template <class Call>
long traced_enter(int fd, uint32_t to_submit, uint32_t min_complete, uint32_t flags,
                  bool returns_errno, Call&& call) {
  Scope scope;
  Ring* ring = find_ring(fd);
  emit_uring_enter_begin(scope.call(), fd, to_submit, min_complete, flags);
  if (ring != nullptr) {
    record_completions(*ring, fd);
    if (to_submit > 0) record_submissions(*ring, fd, to_submit);
  }
  long result = call();
  const int saved = errno;
  if (ring != nullptr) record_completions(*ring, fd);
  const int err = result >= 0 ? 0 : returns_errno ? saved : static_cast<int>(-result);
  emit_uring_enter_end(scope.call(), fd, result, err);
  errno = saved;
  return result;
}

AsyncOp async_op_of(const struct iocb& cb) {
  switch (cb.aio_lio_opcode) {
    case IOCB_CMD_PREAD:
    case IOCB_CMD_PREADV:
      return AsyncOp::kRead;
    case IOCB_CMD_PWRITE:
    case IOCB_CMD_PWRITEV:
      return AsyncOp::kWrite;
    case IOCB_CMD_FSYNC:
      return AsyncOp::kFsync;
    case IOCB_CMD_FDSYNC:
      return AsyncOp::kFdatasync;
    default:
      return AsyncOp::kOther;
  }
}

}  // namespace
}  // namespace nanotrace::interpose

using namespace nanotrace::interpose;

extern "C" {

long syscall(long number, ...) noexcept {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& v : a) v = va_arg(ap, long);
  va_end(ap);
  auto real = NANOTRACE_REAL(SyscallFn, syscall);
  if ((number != SYS_io_uring_setup && number != SYS_io_uring_enter) || passthrough()) {
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  }
  auto call = [&]() noexcept { return real(number, a[0], a[1], a[2], a[3], a[4], a[5]); };
  if (number == SYS_io_uring_setup) {
    return traced_setup(static_cast<uint32_t>(a[0]), reinterpret_cast<io_uring_params*>(a[1]), true,
                        call);
  }
  return traced_enter(static_cast<int>(a[0]), static_cast<uint32_t>(a[1]),
                      static_cast<uint32_t>(a[2]), static_cast<uint32_t>(a[3]), true, call);
}

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) noexcept {
  void* result = NANOTRACE_REAL(MmapFn, mmap)(addr, len, prot, flags, fd, offset);
  if (fd >= 0 && !passthrough()) note_ring_mapping(fd, offset, result);
  return result;
}
int munmap(void* addr, size_t len) noexcept {
  if (addr != nullptr && !passthrough()) note_ring_unmap(addr);
  return NANOTRACE_REAL(MunmapFn, munmap)(addr, len);
}
void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t offset) noexcept {
  void* result = NANOTRACE_REAL(MmapFn, mmap64)(addr, len, prot, flags, fd, offset);
  if (fd >= 0 && !passthrough()) note_ring_mapping(fd, offset, result);
  return result;
}

// liburing's exported entry points return -errno.
int io_uring_setup(unsigned entries, struct io_uring_params* p) {
  auto real = NANOTRACE_REAL(UringSetupFn, io_uring_setup);
  if (real == nullptr) return -ENOSYS;
  if (passthrough()) return real(entries, p);
  return static_cast<int>(traced_setup(entries, p, false, [&] { return real(entries, p); }));
}
int io_uring_enter(unsigned fd, unsigned to_submit, unsigned min_complete, unsigned flags,
                   void* sig) {
  auto real = NANOTRACE_REAL(UringEnterFn, io_uring_enter);
  if (real == nullptr) return -ENOSYS;
  if (passthrough()) return real(fd, to_submit, min_complete, flags, sig);
  return static_cast<int>(
      traced_enter(static_cast<int>(fd), to_submit, min_complete, flags, false,
                   [&] { return real(fd, to_submit, min_complete, flags, sig); }));
}
int io_uring_enter2(unsigned fd, unsigned to_submit, unsigned min_complete, unsigned flags,
                    void* sig, size_t size) {
  auto real = NANOTRACE_REAL(UringEnter2Fn, io_uring_enter2);
  if (real == nullptr) return -ENOSYS;
  if (passthrough()) return real(fd, to_submit, min_complete, flags, sig, size);
  return static_cast<int>(
      traced_enter(static_cast<int>(fd), to_submit, min_complete, flags, false,
                   [&] { return real(fd, to_submit, min_complete, flags, sig, size); }));
}

// libaio: both return the count or -errno.
int io_submit(void* ctx, long nr, struct iocb** iocbs) {
  auto real = NANOTRACE_REAL(IoSubmitFn, io_submit);
  if (real == nullptr) return -ENOSYS;
  if (passthrough()) return real(ctx, nr, iocbs);
  Scope scope;
  const auto context = reinterpret_cast<uint64_t>(ctx);
  emit_aio_submit_begin(scope.call(), context, nr);
  for (long i = 0; iocbs != nullptr && i < nr; ++i) {
    const struct iocb* cb = iocbs[i];
    if (cb == nullptr) continue;
    uint64_t bytes = cb->aio_nbytes;
    if (cb->aio_lio_opcode == IOCB_CMD_PREADV || cb->aio_lio_opcode == IOCB_CMD_PWRITEV) {
      bytes = iov_total(cb->aio_buf, cb->aio_nbytes);
    }
    const int fd = static_cast<int>(cb->aio_fildes);
    note_fd(fd);
    emit_iocb(context, reinterpret_cast<uint64_t>(cb), fd, cb->aio_lio_opcode, async_op_of(*cb),
              cb->aio_offset, bytes);
  }
  int result = real(ctx, nr, iocbs);
  const int saved = errno;
  emit_aio_submit_end(scope.call(), result, result < 0 ? -result : 0);
  errno = saved;
  return result;
}

int io_getevents(void* ctx, long min_nr, long nr, struct io_event* events,
                 struct timespec* timeout) {
  auto real = NANOTRACE_REAL(IoGeteventsFn, io_getevents);
  if (real == nullptr) return -ENOSYS;
  if (passthrough()) return real(ctx, min_nr, nr, events, timeout);
  Scope scope;
  const auto context = reinterpret_cast<uint64_t>(ctx);
  emit_aio_getevents_begin(scope.call(), context, min_nr, nr);
  int result = real(ctx, min_nr, nr, events, timeout);
  const int saved = errno;
  for (int i = 0; i < result; ++i) {
    emit_aio_event(context, events[i].obj, events[i].res);
  }
  emit_aio_getevents_end(scope.call(), result, result < 0 ? -result : 0);
  errno = saved;
  return result;
}

}  // extern "C"
