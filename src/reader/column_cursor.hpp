// A thread stream's position in the column reader's merge (columns.cc) and in the count that
// places the second part of a split read (column_split.cc): the record under the cursor,
// checked, with its clock value. Internal header.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "nanotrace/reader.hpp"
#include "reader/record_walk.hpp"

namespace nanotrace::reader {

// The size of the record at data[off, bytes), checked by the walk's rules (record_walk.hpp);
// 0 where the span's records end: at its end, at an end marker (a zero first word), or at a
// malformed record.
inline uint32_t checked_size(const RecordSizer& sizer, const uint8_t* data, uint32_t off,
                             uint32_t bytes) {
  if (off + 8 > bytes || load_u64(data + off) == 0) return 0;
  return sizer.size(data, off, bytes);
}

// One thread stream's position: the record at span.data + offset (size bytes, checked), with
// its clock value. Blocks of a file come unchecked (UncheckedSpanSource): each record is
// checked as the merge reaches it, before its clock value counts, and decoded in the same
// pass. Other streams' spans were walked already and pass the same checks.
struct ColumnCursor {
  std::unique_ptr<SpanSource> source;
  UncheckedSpanSource* unchecked = nullptr;  // null: checked spans from source
  const RecordSizer* sizer = nullptr;        // checks the spans' records
  RecordSpan span{};
  bool have_span = false;
  bool started = false;  // the span has handed out a record: seq counts from its first_seq
  uint32_t offset = 0;
  uint32_t size = 0;  // of the record at offset; 0: none
  uint64_t seq = 0;
  uint64_t ticks = 0;
  uint64_t expected_seq = 0;  // of the current span's first record, without a loss

  void set(std::unique_ptr<SpanSource> s, const RecordSizer& checked) {
    source = std::move(s);
    sizer = &checked;
    if (auto* u = dynamic_cast<UncheckedSpanSource*>(source.get())) {
      if (const RecordSizer* own = u->unchecked_sizer()) {
        unchecked = u;
        sizer = own;
      }
    }
  }

  // Moves onto the next record if the span has none left; false at the stream's end.
  bool load() {
    while (size == 0) {
      if (have_span && unchecked != nullptr) {
        const bool corrupt = offset + 8 <= span.bytes && load_u64(span.data + offset) != 0;
        unchecked->finish_unchecked(started ? static_cast<uint32_t>(seq - span.first_seq) : 0,
                                    corrupt);
      }
      have_span = unchecked != nullptr ? unchecked->next_unchecked(&span) : source->next(&span);
      if (!have_span) return false;
      offset = 0;
      started = false;
      size = checked_size(*sizer, span.data, 0, span.bytes);
      if (size != 0) {
        started = true;
        expected_seq = seq;
        seq = span.first_seq;
      }
    }
    ticks = abi::expand_ticks(span.base_ticks, load_u64(span.data + offset) >> 16);
    return true;
  }
};

}  // namespace nanotrace::reader
