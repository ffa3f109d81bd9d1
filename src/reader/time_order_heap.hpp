// The order in which a trace's streams are merged: smallest clock value first, ties by stream
// index. A min-heap of streams keyed by both in one 128-bit number, compared without a
// branch (streams interleave record by record, so a compare's outcome is not predictable).
// The reader's merge (merged_source.hpp) and the Perfetto export's merge of raw records
// (export/raw_merge.cc) both use it: one order.
//
// Internal header (src/reader). Thread safety: none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace nanotrace::reader {

class TimeOrderHeap {
 public:
  // Adds a stream whose next record is at `ticks`; call make() after the last one.
  void add(uint64_t ticks, uint32_t stream) { heap_.push_back(key(ticks, stream)); }
  void make() { std::make_heap(heap_.begin(), heap_.end(), std::greater<>()); }

  bool empty() const { return heap_.empty(); }
  // The stream whose record comes next. REQUIRES: !empty().
  uint32_t top() const { return static_cast<uint32_t>(heap_[0]); }
  // The top stream's next record is at `ticks`: it sinks to where it belongs (one pass down
  // the heap, not a pop and a push).
  void replace_top(uint64_t ticks) {
    heap_[0] = key(ticks, top());
    sift_down();
  }
  // The top stream has ended.
  void remove_top() {
    heap_[0] = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down();
  }

 private:
  static unsigned __int128 key(uint64_t ticks, uint32_t stream) {
    return static_cast<unsigned __int128>(ticks) << 32 | stream;
  }
  void sift_down() {
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

  std::vector<unsigned __int128> heap_;
};

}  // namespace nanotrace::reader
