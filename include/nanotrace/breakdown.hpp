// Where an I/O's time went: each user-space I/O of an iograph trace recorded with
// `record --kernel io_uring,block` joined with its kernel events, and per-stage percentiles.
//
// The join: iograph's node_submit (fields node, offset) opens an I/O; io_uring's
// io_uring_submit_req with user_data = node is its submission to the kernel; block's
// block_rq_issue whose sector range holds offset / 512 (issued after that) is its block
// request, and block_rq_complete of that request (same device and sector) the device
// completion; io_uring_complete with user_data = node is the completion the kernel posted,
// and iograph's node_complete (node) the user-space completion. Stages:
//   user submit -> io_uring submit -> block issue -> block complete -> io_uring complete
//   -> user complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

struct BreakdownStage {
  std::string name;  // "user submit -> io_uring submit", ...
  uint64_t count = 0;
  uint64_t p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;  // exact: at least X% at or below
  double mean_ns = 0;
};

struct IoBreakdown {
  uint64_t ios = 0;       // user I/Os submitted after kernel capture began and completed
  uint64_t joined = 0;    // of them, with every kernel stage found
  uint64_t ordered = 0;   // of the joined, with the six times strictly increasing
  uint64_t no_uring = 0;  // no io_uring submission or completion found
  uint64_t no_block = 0;  // no block request found (e.g. a file on a page-cache hit)
  std::vector<BreakdownStage> stages;  // over the joined I/Os, plus "total"
};

// Errors: kNotFound (the trace has no iograph node events, or no kernel events).
Result<IoBreakdown> analyze_breakdown(Trace& trace);
// The same, also giving each stage's latencies (ns, the joined I/Os in completion order; one
// vector per entry of IoBreakdown::stages), for a comparison of two traces (nanotrace/diff.hpp).
Result<IoBreakdown> analyze_breakdown(Trace& trace, std::vector<std::vector<uint64_t>>* latencies);

}  // namespace nanotrace
