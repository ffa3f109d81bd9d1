// RawRecordMerge (see raw_merge.hpp): a heap of reader::ColumnCursor, one per thread stream,
// as the column reader walks them, merged in the reader's order (reader/time_order_heap.hpp).
#include "export/raw_merge.hpp"

namespace nanotrace::exporter {

RawRecordMerge::RawRecordMerge(Trace& trace) : sizer_(trace) {
  std::vector<std::unique_ptr<SpanSource>> sources = trace.read_spans();
  cursors_.resize(sources.size());
  for (uint32_t i = 0; i < sources.size(); ++i) {
    cursors_[i].set(std::move(sources[i]), sizer_);
    if (cursors_[i].load()) heap_.add(cursors_[i].ticks, i);
  }
  heap_.make();
}

bool RawRecordMerge::next(Raw* out) {
  if (handed_out_) advance_top();
  handed_out_ = !heap_.empty();
  if (!handed_out_) return false;
  const uint32_t thread = heap_.top();
  const reader::ColumnCursor& c = cursors_[thread];
  *out = {c.span.data + c.offset, c.size, thread, c.ticks, c.seq};
  return true;
}

// The top cursor moves past the record handed out (its span may be released now) and sinks
// to where its next record belongs, or leaves the heap at its stream's end.
void RawRecordMerge::advance_top() {
  reader::ColumnCursor& c = cursors_[heap_.top()];
  c.offset += c.size;
  ++c.seq;
  c.size = reader::checked_size(*c.sizer, c.span.data, c.offset, c.span.bytes);
  if (c.load()) {
    heap_.replace_top(c.ticks);
  } else {
    heap_.remove_top();
  }
}

std::vector<ThreadStats> RawRecordMerge::threads() const {
  std::vector<ThreadStats> out;
  for (const reader::ColumnCursor& c : cursors_) out.push_back(c.source->stats());
  return out;
}

}  // namespace nanotrace::exporter
