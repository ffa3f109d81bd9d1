// io_uring setup (flags, registered file and buffers) and the counted submit/wait calls.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "uring_ring.hpp"

namespace iograph::internal {

Ring::~Ring() {
  if (initialized_) io_uring_queue_exit(&ring_);
}

Status Ring::init(const ExecOptions& options, int fd) {
  io_uring_params params = {};
  if (options.sqpoll) {
    params.flags |= IORING_SETUP_SQPOLL;
    params.sq_thread_idle = 50;
  }
  if (options.coop_taskrun) params.flags |= IORING_SETUP_COOP_TASKRUN;
  if (options.defer_taskrun) {
    params.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  }
  if (options.defer_taskrun && options.sqpoll) {
    return Status::Invalid("DEFER_TASKRUN cannot be combined with SQPOLL");
  }
  int ret = io_uring_queue_init_params(options.queue_depth, &ring_, &params);
  if (ret < 0) {
    if (ret == -EINVAL && params.flags) {
      return Status::Unsupported(fmt::format("io_uring setup refused the flags (0x{:x}): {}",
                                             params.flags, strerror(-ret)));
    }
    return Status::FromErrno("io_uring_queue_init_params", -ret);
  }
  initialized_ = true;
  sqpoll_ = options.sqpoll;
  if (options.fixed_files) {
    if (fd < 0) return Status::Invalid("registered files need a target with a file");
    ret = io_uring_register_files(&ring_, &fd, 1);
    if (ret < 0) return Status::FromErrno("io_uring_register_files", -ret);
  }
  return Status::Ok();
}

Status Ring::register_buffer(void* base, size_t bytes) {
  if (buffers_registered_) {
    io_uring_unregister_buffers(&ring_);
    buffers_registered_ = false;
  }
  iovec vec = {base, bytes};
  int ret = io_uring_register_buffers(&ring_, &vec, 1);
  if (ret < 0) return Status::FromErrno("io_uring_register_buffers", -ret);
  buffers_registered_ = true;
  return Status::Ok();
}

Status Ring::reserve(unsigned count) {
  while (io_uring_sq_space_left(&ring_) < count) {
    if (io_uring_sq_ready(&ring_) > 0 && !sqpoll_) {
      if (Status s = submit_and_wait(0); !s.ok()) return s;
      continue;
    }
    if (sqpoll_) {
      if (io_uring_sq_ready(&ring_) > 0) {
        if (Status s = submit_and_wait(0); !s.ok()) return s;
      }
      int ret = io_uring_sqring_wait(&ring_);
      ++enters_;
      if (ret < 0 && ret != -EINTR) return Status::FromErrno("io_uring_sqring_wait", -ret);
      continue;
    }
    return Status::Invalid(fmt::format("{} SQEs do not fit in the ring", count));
  }
  return Status::Ok();
}

io_uring_sqe* Ring::sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (!sqe) {
    if (!reserve(1).ok()) return nullptr;
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

Status Ring::submit_and_wait(unsigned wait_nr) {
  for (;;) {
    // liburing 2.3 enters when it must wait, when the CQ needs a flush, or when it has SQEs
    // to submit and no SQPOLL thread is awake to take them.
    const unsigned pending = io_uring_sq_ready(&ring_);
    const unsigned kflags = IO_URING_READ_ONCE(*ring_.sq.kflags);
    const bool needs_flush = kflags & (IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN);
    const bool enters = wait_nr > 0 || needs_flush ||
                        (pending > 0 && (!sqpoll_ || (kflags & IORING_SQ_NEED_WAKEUP)));
    int ret = io_uring_submit_and_wait(&ring_, wait_nr);
    if (enters) ++enters_;
    if (ret >= 0) return Status::Ok();
    if (ret == -EINTR) continue;
    return Status::FromErrno("io_uring_submit_and_wait", -ret);
  }
}

}  // namespace iograph::internal
