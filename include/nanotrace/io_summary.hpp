// The one-screen answer to "what I/O did this program do": from a trace recorded through the
// I/O interposer (`nanotrace run`), calls, bytes, errors and latency percentiles per file (or
// device, pipe, socket) and operation, like `strace -c` with percentiles.
//
// Pairs: a call's begin and end records (same process image, same `call`); an io_uring
// request's SQE and its CQE (same ring and user_data); a libaio iocb and its completion event
// (same context and iocb). Files: a descriptor's path comes from the interposer's
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
};

struct IoSummary {
  std::vector<IoSummaryRow> rows;  // by total time, largest first
  uint64_t unmatched = 0;          // begins without an end (lost, or still running)
  uint64_t lost = 0;               // records the trace lost
};

// Errors: kNotFound when the trace holds none of the interposer's events.
Result<IoSummary> summarize_io(Trace& trace);

}  // namespace nanotrace
