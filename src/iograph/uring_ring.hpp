// A liburing ring set up from ExecOptions, with the submit/wait calls the executors use.
// Every call that enters the kernel is counted, following liburing 2.3's rules for when
// io_uring_submit_and_wait really calls io_uring_enter, so reports can give system calls
// per graph without tracing the process.
#pragma once

#include <liburing.h>

#include <cstdint>

#include "iograph/executor.hpp"

namespace iograph::internal {

class Ring {
 public:
  Ring() = default;
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring();

  // Creates the ring with options.queue_depth entries and the requested setup flags, and
  // registers `fd` as fixed file 0 when options.fixed_files is set.
  Status init(const ExecOptions& options, int fd);
  // Registers [base, base+bytes) as fixed buffer 0, replacing an earlier registration.
  Status register_buffer(void* base, size_t bytes);

  io_uring* get() { return &ring_; }
  bool ready() const { return initialized_; }

  // Makes room for `count` SQEs so a link chain is published by one tail update.
  Status reserve(unsigned count);
  // A free SQE (reserve() first when several must stay together).
  io_uring_sqe* sqe();
  // Submits everything queued and waits for at least wait_nr completions.
  Status submit_and_wait(unsigned wait_nr);

  uint64_t enter_calls() const { return enters_; }

 private:
  io_uring ring_ = {};
  bool initialized_ = false;
  bool sqpoll_ = false;
  bool buffers_registered_ = false;
  uint64_t enters_ = 0;
};

}  // namespace iograph::internal
