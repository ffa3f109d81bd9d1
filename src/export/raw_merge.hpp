// The records of a trace's threads in the order Trace::read_all() gives them (smallest clock
// value first, ties by thread index), with the same checks and loss accounting, but not
// decoded: each comes as its raw bytes (docs/format.md, "Rings, blocks and records"), for an
// exporter that encodes a record straight from its slots instead of from a Record.
#pragma once

#include <cstdint>
#include <vector>

#include "nanotrace/reader.hpp"
#include "reader/column_cursor.hpp"
#include "reader/time_order_heap.hpp"

namespace nanotrace::exporter {

class RawRecordMerge {
 public:
  // One record: word0 then its payload, checked against its event's layout (its event id
  // indexes Trace::events() as Record::event's would).
  struct Raw {
    const uint8_t* data = nullptr;
    uint32_t size = 0;
    uint32_t thread = 0;  // index into threads()
    uint64_t ticks = 0;
    uint64_t seq = 0;
  };

  explicit RawRecordMerge(Trace& trace);
  // The next record; false at the end. Its bytes stay valid until the next call.
  bool next(Raw* out);
  // Every thread's statistics so far (complete once next() returned false).
  std::vector<ThreadStats> threads() const;

 private:
  void advance_top();

  reader::RecordSizer sizer_;  // before cursors_: they point to it
  std::vector<reader::ColumnCursor> cursors_;
  reader::TimeOrderHeap heap_;  // cursors with a record left, in the reader's merge order
  bool handed_out_ = false;     // the top cursor's record was handed out: move it on first
};

}  // namespace nanotrace::exporter
