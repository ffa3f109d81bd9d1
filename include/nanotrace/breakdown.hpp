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
// analyze_breakdown summarizes the stages; IoStageTracker hands back each I/O's six times,
// for a consumer that stores every I/O (`nanotrace ship`) or reads the trace itself.
#pragma once

#include <cstdint>
#include <memory>
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

// An I/O's times, in stage order: user submit, io_uring submit, block issue, block complete,
// io_uring complete, user complete.
inline constexpr int kIoTimes = 6;

// One user I/O followed through the stages: what analyze_breakdown summarizes.
struct IoStages {
  uint64_t user_data = 0;  // iograph's node (= the io_uring request's user_data)
  uint64_t sector = 0;     // where it starts: the node_submit's offset / 512
  uint64_t dev = 0;        // the block request's device (dev_t as the kernel logs it; 0: none)
  uint64_t ring = 0;       // the io_uring context (ctx) its submit named; 0: none
  uint32_t thread = 0;     // the user submit record's thread stream (RecordSource::threads())
  uint64_t ticks[kIoTimes] = {};  // each time's clock value (Record::ticks); 0: not found
  uint64_t ns[kIoTimes] = {};     // and its Record::time_ns

  bool found(int time) const { return ticks[time] != 0; }
  bool has_uring() const { return found(1) && found(4); }
  bool has_block() const { return found(2) && found(3); }
  bool joined() const;   // every time found
  bool ordered() const;  // joined, and the six clock values strictly increasing
  // The time spent in stage s, as IoBreakdown::stages names it: 0..4 between times s and
  // s + 1, 5 the total (user submit -> user complete); 0 if either time is missing or the
  // later is not after the earlier.
  uint64_t stage_ns(int s) const;
};

// The stages' names, as IoBreakdown::stages has them (kIoTimes entries, the total last).
const std::vector<std::string>& breakdown_stage_names();

// Follows each I/O through the stages as the records of trace.read_all_with_kernel() go by
// (time order). Memory: one IoStages per I/O submitted while the kernel was traced.
class IoStageTracker {
 public:
  // Errors: kNotFound (the trace has no iograph node events, or no kernel events).
  static Result<std::unique_ptr<IoStageTracker>> create(const Trace& trace);
  ~IoStageTracker();
  IoStageTracker(const IoStageTracker&) = delete;
  IoStageTracker& operator=(const IoStageTracker&) = delete;

  void add(const Record& r);
  // The I/Os completed in user space (submitted after the kernel's capture began), in
  // completion order, with every time found so far.
  std::vector<IoStages> completed() const;
  // What analyze_breakdown returns, over the records added so far; each stage's latencies
  // too, if asked (see analyze_breakdown).
  IoBreakdown summary(std::vector<std::vector<uint64_t>>* latencies = nullptr) const;

 private:
  IoStageTracker();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Errors: kNotFound (the trace has no iograph node events, or no kernel events).
Result<IoBreakdown> analyze_breakdown(Trace& trace);
// The same, also giving each stage's latencies (ns, the joined I/Os in completion order; one
// vector per entry of IoBreakdown::stages), for a comparison of two traces (nanotrace/diff.hpp).
Result<IoBreakdown> analyze_breakdown(Trace& trace, std::vector<std::vector<uint64_t>>* latencies);

}  // namespace nanotrace
