// A trace as rows of the shipped tables (ship/schema.hpp): one pass over its records merged
// with its kernel events (Trace::read_all_with_kernel) makes the events rows and, through the
// analysis layer's IntervalMatcher, the intervals rows (one per matched begin/end pair, its
// latency exactly as `nanotrace latency` computes it) and, for a trace of iograph I/Os recorded
// with their kernel events, the analysis layer's IoStageTracker the io_stages rows (one per
// I/O, its stages exactly as `nanotrace breakdown` computes them); then come the losses rows
// (per thread incarnation and cause) and the trace's row.
//
// The trace id: a hash of what makes one trace distinct (its node; each process's pid, clock
// rate and the clock pair taken when its segment was created; each thread slot's generation,
// tid and records written), so the same trace file gives the same id wherever and however
// often it is shipped, and a later snapshot of the same process (more records) another.
//
// Nodes: the machines the trace file records (Trace::nodes(): one in a snapshot or recording,
// several in a merged file), each process's rows under its node's hostname, and one traces row
// per node with its identity, clock error bound, alignment and trigger origin. A file that
// records no node is one node named as given, else by the local hostname; the name given also
// renames the one node of a file that records one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nanotrace/analysis.hpp"
#include "nanotrace/breakdown.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"
#include "ship/native_block.hpp"
#include "ship/schema.hpp"

namespace nanotrace::ship {

// Takes a full block of one table's rows (the block is cleared after it returns).
using BlockSink = std::function<Status(const TableDef& table, const NativeBlock& block)>;

struct RowCounts {
  uint64_t events = 0;
  uint64_t intervals = 0;
  uint64_t ios = 0;  // io_stages rows
  uint64_t losses = 0;
  uint64_t lost_records = 0;  // sum of the losses rows
};

class TraceRows {
 public:
  // node: the name of the trace's one node ("": the file's, else the local hostname).
  // pairs: the begin/end rules whose intervals to make; empty: those the event names suggest
  // (infer_pairs). Rules that name events the trace lacks are skipped (skipped_pairs()).
  // Errors: kInvalidArgument for a node name given for a trace of several nodes.
  static Result<std::unique_ptr<TraceRows>> open(Trace& trace, const std::string& node,
                                                 std::vector<PairRule> pairs);

  uint64_t trace_id() const { return trace_id_; }
  // Its nodes' names (valid UTF-8), in the trace's order.
  std::vector<std::string> node_names() const;
  const std::vector<std::string>& skipped_pairs() const { return skipped_; }

  // Sends every events, intervals, io_stages and losses row to sink in blocks of up to batch_rows
  // rows (or 64 MiB of values).
  Status write(size_t batch_rows, const BlockSink& sink);
  const RowCounts& counts() const { return counts_; }
  // Days (since 1970-01-01, UTC) of the first and the last record (after write()): every row
  // of the trace is dated within them.
  uint16_t first_day() const;
  uint16_t last_day() const;
  // The trace's rows, one per node (after write()): source names where it came from.
  void traces_rows(const std::string& source, NativeBlock* block) const;

 private:
  struct ThreadRow;
  struct EventNames;
  struct Impl;
  // What one node's traces row needs.
  struct NodeRow {
    std::string name;  // valid UTF-8
    uint64_t first_ns = 0, last_ns = 0;
    bool any = false;  // a record seen
    uint64_t events = 0, intervals = 0, ios = 0, lost = 0;
  };
  TraceRows(Trace& trace, std::vector<PairRule> pairs);
  Status write_io_stages(Impl& d, size_t batch_rows, const BlockSink& sink);
  Status write_losses(Impl& d, const BlockSink& sink);
  uint32_t node_of_process(uint32_t process) const;
  void trace_row(uint32_t node, const std::string& source, uint64_t shipped,
                 NativeBlock* block) const;
  Trace& trace_;
  std::vector<NodeRow> nodes_;
  std::vector<ResolvedPair> rules_;
  std::vector<std::string> skipped_;
  // The trace's I/Os through their stages (write()); null without iograph I/Os and kernel
  // events.
  std::unique_ptr<IoStageTracker> stages_;
  uint64_t trace_id_ = 0;
  RowCounts counts_;
  uint64_t first_ns_ = 0, last_ns_ = 0;  // realtime of the first and last record
};

// A block whose columns are table's.
NativeBlock block_for(const TableDef& table);
// The local hostname.
std::string local_hostname();

}  // namespace nanotrace::ship
