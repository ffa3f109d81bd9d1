// RawRecordMerge (see raw_merge.hpp): a heap of reader::ColumnCursor, one per thread stream,
// as the column reader walks them; the merge order is MergedSource's.
#include "export/raw_merge.hpp"

#include <algorithm>

namespace nanotrace::exporter {
namespace {

unsigned __int128 key(uint64_t ticks, uint32_t thread) {
  return static_cast<unsigned __int128>(ticks) << 32 | thread;
}

}  // namespace

RawRecordMerge::RawRecordMerge(Trace& trace) : sizer_(trace) {
  std::vector<std::unique_ptr<SpanSource>> sources = trace.read_spans();
  cursors_.resize(sources.size());
  for (uint32_t i = 0; i < sources.size(); ++i) {
    cursors_[i].set(std::move(sources[i]), sizer_);
    if (cursors_[i].load()) heap_.push_back(key(cursors_[i].ticks, i));
  }
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
}

bool RawRecordMerge::next(Raw* out) {
  if (handed_out_) advance_top();
  handed_out_ = !heap_.empty();
  if (!handed_out_) return false;
  const auto thread = static_cast<uint32_t>(heap_[0]);
  const reader::ColumnCursor& c = cursors_[thread];
  *out = {c.span.data + c.offset, c.size, thread, c.ticks, c.seq};
  return true;
}

// The top cursor moves past the record handed out (its span may be released now) and sinks
// to where its next record belongs, or leaves the heap at its stream's end.
void RawRecordMerge::advance_top() {
  const auto thread = static_cast<uint32_t>(heap_[0]);
  reader::ColumnCursor& c = cursors_[thread];
  c.offset += c.size;
  ++c.seq;
  c.size = reader::checked_size(*c.sizer, c.span.data, c.offset, c.span.bytes);
  if (c.load()) {
    heap_[0] = key(c.ticks, thread);
  } else {
    heap_[0] = heap_.back();
    heap_.pop_back();
    if (heap_.empty()) return;
  }
  sift_down();
}

void RawRecordMerge::sift_down() {
  const size_t n = heap_.size();
  const unsigned __int128 top = heap_[0];
  size_t at = 0;
  for (size_t child = 1; child < n; child = 2 * at + 1) {
    if (child + 1 < n && heap_[child + 1] < heap_[child]) ++child;
    if (!(heap_[child] < top)) break;
    heap_[at] = heap_[child];
    at = child;
  }
  heap_[at] = top;
}

std::vector<ThreadStats> RawRecordMerge::threads() const {
  std::vector<ThreadStats> out;
  for (const reader::ColumnCursor& c : cursors_) out.push_back(c.source->stats());
  return out;
}

}  // namespace nanotrace::exporter
