// A column read of a trace file cut in two parts that two threads read at once
// (ColumnReader::open_parts). Internal header.
//
// The cut is a clock value T: in every thread stream, the records before its first record at
// or after T belong to the first part, the rest to the second. The merge of all streams
// (smallest clock value first, ties by thread index) hands out every record of the first part
// before any of the second, in the order the first part's streams alone merge in: while a
// stream has records of the first part, its next one lies below T, and a stream whose first
// part is used up shows one at or after T, which loses to it. That holds whatever the clock
// values (a stream need not be in order: its first record at or after T decides), so each
// part is merged on its own, and the second part's rows follow the first's in every table.
//
// The second part's rows go after the first's, so its reader first counts the first part's
// rows of each table: it walks every stream up to the cut, stream by stream, without decoding
// or merging. Both readers check the same bytes by the same rules, so they agree on every
// record.
//
// T is not fixed ahead. The second reader counts in steps of time while the first reads, and
// chooses T where what is left to the first (from its position to the count's) equals what is
// left after the count: on a loaded machine the part that gets less CPU gets less to read.
// The first reader never reads a record at or past the clock value it promised (SplitBoundary)
// without extending the promise, and T is never before the promise.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "nanotrace/columns.hpp"
#include "reader/column_cursor.hpp"

namespace nanotrace {

// Tests: split reads of small traces, whose cut is given (every cut must give the rows of a
// whole read) or chosen as they read.
struct ColumnSplitTesting {
  // cut_ticks: where the second part begins in each stream; none: chosen as they read.
  static Result<std::vector<std::unique_ptr<ColumnReader>>> open_parts(
      Trace& trace, const ColumnOptions& options, std::optional<uint64_t> cut_ticks);
  // read_columns() in two parts.
  static Result<ColumnSet> read_columns(Trace& trace, const ColumnOptions& options,
                                        std::optional<uint64_t> cut_ticks);
};

namespace reader {

// Where a part's records end in each stream: before the first record at or after `ticks`,
// or nowhere (`open`: at the stream's end).
struct SplitBound {
  uint64_t ticks = 0;
  bool open = false;
  bool before(uint64_t t) const { return open || t < ticks; }
  bool after(const SplitBound& b) const { return !b.open && (open || ticks > b.ticks); }
};

// What the two readers of a split read share: the first's promise, the cut once chosen, and
// how far the first has read.
class SplitBoundary {
 public:
  // total_bytes: of every stream's records (roughly), for the balance.
  explicit SplitBoundary(uint64_t total_bytes) : total_bytes_(total_bytes) {}
  // A boundary whose cut is chosen already (tests: a cut anywhere must give the same rows).
  explicit SplitBoundary(SplitBound cut) : chosen_(true), cut_(cut) {}

  // The first reader, at its bound: extends its promise to `want`, unless the cut is chosen.
  // Returns its bound now (the cut, once chosen).
  SplitBound extend(SplitBound want);
  // The first reader read every stream to its end before a cut was chosen: the second part
  // is empty.
  void first_ended();
  // The second reader: chooses the cut at `at`, or at the first's promise if that lies
  // further, unless it was chosen already. Returns the cut.
  SplitBound choose(SplitBound at);
  // Whether the cut is chosen (by the first reader's end, or beforehand); *cut then holds it.
  bool chosen(SplitBound* cut);

  void set_first_bytes(uint64_t bytes) { first_bytes_.store(bytes, std::memory_order_relaxed); }
  uint64_t first_bytes() const { return first_bytes_.load(std::memory_order_relaxed); }
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::mutex mu_;
  SplitBound promise_;  // the first reader reads no record at or past it
  bool chosen_ = false;
  SplitBound cut_;
  std::atomic<uint64_t> first_bytes_{0};  // of records the first reader has read
  uint64_t total_bytes_ = 0;
};

// Walks the streams of `live` (indexes into cursors) past their records before `end`,
// counting the rows of each table (table_of: by event id, -1 for events not read) into rows;
// a stream that ends leaves live. Returns the bytes of the records walked.
uint64_t count_rows_before(std::vector<ColumnCursor>& cursors, std::vector<uint32_t>* live,
                           const std::vector<int>& table_of, SplitBound end,
                           std::vector<uint64_t>* rows);

// The bytes a trace file's thread streams hold (0 for a live segment, which is not split:
// its rings move while two readers would read them).
uint64_t stream_bytes(const Trace& trace);

}  // namespace reader
}  // namespace nanotrace
