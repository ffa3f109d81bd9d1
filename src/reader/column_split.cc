// The split of a column read in two parts (column_split.hpp): the boundary the two readers
// share, and the second reader's count of the first part's rows.
#include "reader/column_split.hpp"

#include "reader/trace_file.hpp"
#include "reader/trace_internals.hpp"

namespace nanotrace {

Result<std::vector<std::unique_ptr<ColumnReader>>> ColumnSplitTesting::open_parts(
    Trace& trace, const ColumnOptions& options, std::optional<uint64_t> cut_ticks) {
  auto split = cut_ticks ? std::make_shared<reader::SplitBoundary>(reader::SplitBound{*cut_ticks})
                         : std::make_shared<reader::SplitBoundary>(reader::stream_bytes(trace));
  return ColumnReader::open_split(trace, options, std::move(split));
}

Result<ColumnSet> ColumnSplitTesting::read_columns(Trace& trace, const ColumnOptions& options,
                                                   std::optional<uint64_t> cut_ticks) {
  ColumnOptions whole = options;
  whole.max_dictionary_entries = 0;
  auto parts = open_parts(trace, whole, cut_ticks);
  if (!parts.ok()) return parts.status();
  return ColumnReader::read_split(*parts);
}

namespace reader {

SplitBound SplitBoundary::extend(SplitBound want) {
  std::lock_guard<std::mutex> lock(mu_);
  if (chosen_) return cut_;
  if (want.after(promise_)) promise_ = want;
  return promise_;
}

void SplitBoundary::first_ended() {
  std::lock_guard<std::mutex> lock(mu_);
  if (chosen_) return;
  chosen_ = true;
  cut_ = SplitBound{0, true};
}

SplitBound SplitBoundary::choose(SplitBound at) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!chosen_) {
    chosen_ = true;
    cut_ = promise_.after(at) ? promise_ : at;
  }
  return cut_;
}

bool SplitBoundary::chosen(SplitBound* cut) {
  std::lock_guard<std::mutex> lock(mu_);
  if (chosen_) *cut = cut_;
  return chosen_;
}

uint64_t count_rows_before(std::vector<ColumnCursor>& cursors, std::vector<uint32_t>* live,
                           const std::vector<int>& table_of, SplitBound end,
                           std::vector<uint64_t>* rows) {
  const int* const table_of_data = table_of.data();
  const size_t table_count = table_of.size();
  uint64_t* const counts = rows->data();
  uint64_t walked = 0;
  size_t kept = 0;
  for (uint32_t i : *live) {
    ColumnCursor& c = cursors[i];
    bool more = true;
    // As the merge takes records (columns.cc, run()): the cursor's state in locals, one span
    // at a time, each record checked before its clock value counts.
    while (end.before(c.ticks)) {
      const uint8_t* data = c.span.data;
      const uint32_t bytes = c.span.bytes;
      const uint64_t base_ticks = c.span.base_ticks;
      const uint32_t start = c.offset;
      uint32_t off = start, size = c.size;
      uint64_t seq = c.seq, ticks = c.ticks;
      for (;;) {
        const auto id = static_cast<uint16_t>(load_u64(data + off) & 0xffff);
        const int k = id < table_count ? table_of_data[id] : -1;
        if (k >= 0) ++counts[k];
        off += size;
        ++seq;
        size = checked_size(*c.sizer, data, off, bytes);
        if (size == 0) break;
        ticks = abi::expand_ticks(base_ticks, load_u64(data + off) >> 16);
        if (!end.before(ticks)) break;
      }
      walked += off - start;
      c.offset = off;
      c.size = size;
      c.seq = seq;
      c.ticks = ticks;
      if (size != 0) break;  // at a record of the second part
      if (!c.load()) {
        more = false;
        break;
      }
    }
    if (more) (*live)[kept++] = i;
  }
  live->resize(kept);
  return walked;
}

uint64_t stream_bytes(const Trace& trace) {
  const TraceFile* file = TraceInternals::file(trace);
  if (file == nullptr) return 0;
  uint64_t bytes = 0;
  for (const FileStream& s : file->streams) {
    for (const Extent& e : s.extents) bytes += e.raw;
  }
  return bytes;
}

}  // namespace reader
}  // namespace nanotrace
