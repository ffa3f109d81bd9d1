// The one-screen answer to "what I/O did this program do": from a trace recorded through the
// I/O interposer (`nanotrace run`), calls, bytes, errors and latency percentiles per file (or
// device, pipe, socket) and operation, like `strace -c` with percentiles.
//
// Pairs: a call's begin and end records (same process image, same `call`); an io_uring
// request's SQE and its CQE (same ring and user_data); a libaio iocb and its completion event
// (same context and iocb). In a trace recorded with `--kernel io_uring`, also the io_uring
// requests of rings the interposer could not follow (a program that makes the io_uring_enter
// system call itself, as fio does): the kernel's io_uring_submit_req and io_uring_complete
// (same ring and user_data), made by the traced processes' threads, named by
// io_uring_file_get's descriptor; a request is counted once, from the interposer's records
// when it followed the ring. Files: a descriptor's path comes from the interposer's
// io_open:path records, kept per process image through open, dup and close.
//
// Thread safety: a function of a Trace, which belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

struct IoSummaryRow {
  std::string file;  // path, or "fd N" when the trace does not say
  std::string op;    // pread, write, fsync, uring_read, aio_write, ...
  uint64_t calls = 0;
  uint64_t bytes = 0;   // bytes transferred (successful reads, writes and copies)
  uint64_t errors = 0;  // calls that failed (result < 0)
  uint64_t total_ns = 0;
  uint64_t p50_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0;  // nearest rank, exact
  // io_uring requests taken from the kernel's io_uring events (a ring the program entered
  // with its own system call instruction, which the interposer cannot follow).
  bool from_kernel = false;
};

struct IoSummary {
  std::vector<IoSummaryRow> rows;  // by total time, largest first
  uint64_t unmatched = 0;          // begins without an end (lost, or still running)
  uint64_t lost = 0;               // records the trace lost
  // The trace has the kernel's io_uring events (`--kernel io_uring`): requests of rings the
  // interposer did not follow are rows with from_kernel.
  bool uring_from_kernel = false;
  uint64_t kernel_lost = 0;  // kernel events ftrace lost
  // Without them: io_uring requests the rings' totals (io_uring:ring_totals) count beyond
  // those the interposer saw one by one, which are in no row.
  uint64_t uring_unseen = 0;
};

// Errors: kNotFound when the trace holds none of the interposer's events.
Result<IoSummary> summarize_io(Trace& trace);

}  // namespace nanotrace
