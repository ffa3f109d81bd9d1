// The report's timelines: every record and every matched pair of a time range, drawn per
// row (thread) and per pixel column, so that marks never hide each other and a busy stretch
// never looks idle. Each row has a records lane (one bar per column holding records: its
// count, its most frequent event's colour, the first record's fields on hover) and, when
// there are pair rules, a pairs lane (the pairs overlapping the column: their count, the
// slowest one's latency as the bar's height, its fields on hover).
//
// Rows come from RowSet: today one row per thread, the busiest kMaxRows threads alone and
// the rest in one row, so the page's size does not grow with the number of threads. Rows of
// other kinds (a process's threads, kernel CPUs) are new keys of RowSet::row_of.
//
// Memory and output: O(rows x columns) cells, each with at most two hover texts (cut to
// kSampleBytes of field text), whatever the number of records.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/analysis.hpp"
#include "nanotrace/intervals.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::report {

inline constexpr uint32_t kColumns = 1000;   // pixel columns of a timeline
inline constexpr uint32_t kMaxRows = 16;     // rows drawn alone; the rest share one row
inline constexpr size_t kSampleBytes = 160;  // field text of one hovered record
inline constexpr double kLabelWidth = 170;   // row labels left of the chart
inline constexpr uint32_t kNoSample = UINT32_MAX;

// Which row each record belongs to, and the rows' labels. The last row gathers the threads
// without a row of their own (and any thread the first pass did not see); a timeline draws
// it only when it holds something.
class RowSet {
 public:
  // threads: the reader's thread list; records_per_thread: records of each (by index) in the
  // whole trace. The busiest max_rows threads get a row each, in the reader's order.
  static RowSet by_thread(const std::vector<ThreadStats>& threads,
                          const std::vector<uint64_t>& records_per_thread, size_t max_rows);

  uint32_t row_of(const Record& r) const { return row_of_thread(r.thread); }
  uint32_t row_of_thread(uint32_t thread) const {
    return thread < thread_row_.size() ? thread_row_[thread] : shared_row();
  }
  size_t size() const { return labels_.size(); }
  uint32_t shared_row() const { return static_cast<uint32_t>(labels_.size() - 1); }
  const std::string& label(uint32_t row) const { return labels_[row]; }  // raw trace text

 private:
  std::vector<std::string> labels_;
  std::vector<uint32_t> thread_row_;
};

// What the timelines need to know about the trace to draw and label records.
struct TimelineContext {
  const std::vector<ThreadStats>* threads = nullptr;  // tids of sample records
  std::vector<int> event_color;                       // per event slot: report_text.hpp index
  std::vector<std::string> event_name;                // per event slot: full name, as HTML
  const std::vector<ResolvedPair>* rules = nullptr;
  // Events are counted and coloured by slot: a user-space event's id, and after them the
  // kernel events (whose ids index Trace::kernel_events(), a list of their own).
  uint32_t kernel_base = 0;
  uint32_t slot_of(const EventInfo& e) const { return e.is_kernel ? kernel_base + e.id : e.id; }
};

class Timeline {
 public:
  // [begin_ns, end_ns): the range drawn (end_ns > begin_ns).
  Timeline(std::string id, uint64_t begin_ns, uint64_t end_ns, size_t rows, bool pairs_lane);

  bool covers(uint64_t t) const { return t >= begin_ns_ && t < end_ns_; }
  // A record in the range (clamped into it otherwise).
  void add_record(uint32_t row, const Record& r, const TimelineContext& ctx);
  // A matched pair of rule `rule` overlapping the range: it counts in every column it
  // overlaps. end: its end record (for the hover text).
  void add_pair(uint32_t row, uint32_t rule, const Interval& interval, const Record& end,
                const TimelineContext& ctx);

  uint64_t records() const { return records_; }
  uint64_t pairs() const { return pairs_; }

  // The SVG. highlight_*: a range to outline (the busiest window on the overview), or 0, 0.
  void render(fmt::memory_buffer& out, const RowSet& rows, const TimelineContext& ctx,
              uint64_t highlight_begin = 0, uint64_t highlight_end = 0) const;

 private:
  struct RecordCell {
    uint64_t records = 0;
    std::array<uint16_t, 3> event{};  // the first three distinct events, with their counts
    std::array<uint64_t, 3> event_records{};
    uint64_t other_records = 0;
    uint32_t first = kNoSample;  // the first record
  };
  struct PairCell {
    uint64_t pairs = 0;  // pairs overlapping the column
    uint64_t max_latency_ns = 0;
    uint32_t slowest = kNoSample;
    uint32_t rule = 0;
  };
  uint32_t column(uint64_t t) const;
  uint64_t column_begin(uint32_t c) const;
  void render_records(fmt::memory_buffer& out, size_t row, double y, double h,
                      const TimelineContext& ctx) const;
  void render_pairs(fmt::memory_buffer& out, size_t row, double y, double h) const;

  std::string id_;
  uint64_t begin_ns_, end_ns_;
  bool pairs_lane_;
  std::vector<RecordCell> record_cells_;  // row * kColumns + column
  std::vector<PairCell> pair_cells_;
  std::vector<std::string> samples_;  // hover texts (HTML), shared by cells
  uint64_t records_ = 0, pairs_ = 0;
  uint64_t max_records_ = 0, max_latency_ns_ = 0;
};

}  // namespace nanotrace::report
