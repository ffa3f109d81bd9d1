// A trace as rows of the shipped tables (ship/schema.hpp): one pass over its records merged
// with its kernel events (Trace::read_all_with_kernel) makes the events rows and, through the
// analysis layer's IntervalMatcher, the intervals rows (one per matched begin/end pair, its
// latency exactly as `nanotrace latency` computes it) and, for a trace of iograph I/Os recorded
// with their kernel events, the analysis layer's IoStageTracker the io_stages rows (one per
// I/O, its stages exactly as `nanotrace breakdown` computes them); then come the losses rows
// (per thread incarnation and cause) and the trace's row.
//
// The trace id: a hash of what makes one trace distinct (the node names the file records;
// each process's pid, clock rate and the clock pair taken when its segment was created; each
// thread slot's generation, tid and records written) and, for a damaged trace, of what could
// be read of it (Damage::digest), so the same trace file gives the same id wherever, however
// often and under whatever --node it is shipped, a later snapshot of the same process (more
// records) another, and a damaged copy of a file another than the intact file.
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

// Takes a full block of one table's rows: it may take the rows themselves, leaving an empty
// block of the same columns (BlockSenders::send); the block is cleared after it returns.
using BlockSink = std::function<Status(const TableDef& table, NativeBlock& block)>;

struct RowCounts {
  uint64_t events = 0;
  uint64_t intervals = 0;
  uint64_t ios = 0;  // io_stages rows
  uint64_t losses = 0;
  uint64_t lost_records = 0;  // sum of the losses rows
};

// What reading a trace found damaged: corrupt blocks (ThreadStats::corrupt_blocks, and the
// records they made unreadable) and the file's ignored tail (Trace::warning).
struct Damage {
  uint64_t corrupt_blocks = 0;
  uint64_t unreadable = 0;  // records lost to them (ThreadStats::unreadable)
  std::string warning;      // Trace::warning(), or ""
  // "" for an intact trace; else what each stream delivered (records, gaps, corrupt blocks),
  // which the trace id covers: the same damaged file reads the same every time.
  std::string digest;
  bool damaged() const { return !digest.empty(); }
};
// The damage of trace, from the per-stream statistics of a read to its end.
Damage damage_of(const Trace& trace, const std::vector<ThreadStats>& streams);
// Reads every record of trace (each thread's spans, each kernel CPU) to find its damage.
Damage read_damage(Trace& trace);

class TraceRows {
 public:
  // node: the name of the trace's one node ("": the file's, else the local hostname).
  // pairs: the begin/end rules whose intervals to make; empty: those the event names suggest
  // (infer_pairs). Rules that name events the trace lacks are skipped (skipped_pairs()).
  // damage_digest: Damage::digest of the trace as it will read ("" if intact): the id covers
  // it, and write() ships what it reads; damage() says what that was.
  // Errors: kInvalidArgument for a node name given for a trace of several nodes.
  static Result<std::unique_ptr<TraceRows>> open(Trace& trace, const std::string& node,
                                                 std::vector<PairRule> pairs,
                                                 const std::string& damage_digest = "");

  uint64_t trace_id() const { return trace_id_; }
  // Its nodes' names (valid UTF-8), in the trace's order.
  std::vector<std::string> node_names() const;
  const std::vector<std::string>& skipped_pairs() const { return skipped_; }
  // The labels of the pairs whose intervals it stores (valid UTF-8), as `pair` holds them.
  std::vector<std::string> pair_labels() const;

  // Sends every events, intervals, io_stages and losses row to sink in blocks of up to batch_rows
  // rows (or 64 MiB of values).
  Status write(size_t batch_rows, const BlockSink& sink);
  const RowCounts& counts() const { return counts_; }
  // What write() found damaged.
  const Damage& damage() const { return damage_; }
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
    uint64_t events = 0, intervals = 0, ios = 0, lost = 0, corrupt_blocks = 0;
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
  Damage damage_;
  uint64_t first_ns_ = 0, last_ns_ = 0;  // realtime of the first and last record
};

// A block whose columns are table's.
NativeBlock block_for(const TableDef& table);

// The date of a realtime clock value (ns), as every table's date column holds it: days since
// 1970-01-01, UTC. Inline: every events row has one.
inline uint16_t day_of(uint64_t realtime_ns) {
  return static_cast<uint16_t>(realtime_ns / (86400ull * 1000000000ull));
}

}  // namespace nanotrace::ship
