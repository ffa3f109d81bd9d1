// The blocks of a thread's byte stream, as the live and file thread streams both read them:
// the block-header checks (OpenBlock), the walk over a block's records without decoding them
// (record sizes from the event table), and the decoding of the records a walk accepted.
// A span of records that passed the walk is what RecordSpan hands out. Internal header.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::reader {

// A record's first word (id and clock), read from bytes of any alignment.
inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Record sizes by event id, from a trace's event table: each event's abi::RecordLayout (the
// one sizing rule, nanotrace/detail/record_layout.hpp) in a table by id. A record is valid
// when its id names an event (not a guard), its string lengths are at most kMaxStringBytes
// and it fits in the bytes given: the same rules as decode_record.
class RecordSizer {
 public:
  RecordSizer() = default;  // no events: every record is malformed
  explicit RecordSizer(const Trace& trace) : RecordSizer(trace.events()) {}
  // From one process's own event table (a file of several processes).
  explicit RecordSizer(const std::vector<EventInfo>& events);
  // Size of the record at buf[offset, limit), or 0 if it is malformed.
  uint32_t size(const uint8_t* buf, uint32_t offset, uint32_t limit) const {
    if (offset + 8 > limit) return 0;
    uint16_t id;
    __builtin_memcpy(&id, buf + offset, 2);
    if (id >= layouts_.size()) return 0;
    return layouts_[id].layout.size(buf, offset, limit);
  }
  // The layout of event id's records (invalid if id names no event).
  const abi::RecordLayout& layout(uint16_t id) const {
    static constexpr abi::RecordLayout kNone;
    return id < layouts_.size() ? layouts_[id].layout : kNone;
  }

 private:
  // Padded to 64 bytes, so that finding a record's layout by id is a shift, not a multiply
  // (the column reader sizes every record here: 44-byte entries cost it 8 % more
  // instructions a record).
  struct alignas(64) Entry {
    abi::RecordLayout layout;
  };
  std::vector<Entry> layouts_;  // by id
};

// How a walk over a block ended.
enum class WalkEnd : uint8_t {
  kBlock,    // end marker or end of the copied bytes: the block is done
  kCorrupt,  // a malformed record: the rest of the block is unusable
};

// Walks the records of buf[*offset, len) (a block whose record at *offset has sequence
// number *seq), skipping records that start before skip_before (block_pos: position of buf[0];
// records before skip_before were taken by an earlier consumer). Fills span with the
// following records up to the end of the block. Advances *offset and *seq past every record
// walked.
WalkEnd walk_block(const RecordSizer& sizer, const uint8_t* buf, uint32_t len, uint64_t block_pos,
                   uint64_t skip_before, uint64_t base_ticks, uint32_t* offset, uint64_t* seq,
                   RecordSpan* span);

// Decodes the record at buf[offset, limit). Returns its size, or 0 if it is malformed
// (unknown event id, string length past the end).
uint32_t decode_record(const Trace& trace, const uint8_t* buf, uint32_t offset, uint32_t limit,
                       uint64_t base_ticks, Record* record);

// Hands out the records of a thread's spans one at a time, decoded: how a stream's next()
// is built on its next_span().
class SpanRecords {
 public:
  // Decodes the next record of span into r; false once the span is used up.
  bool next(const Trace& trace, uint32_t thread, Record* r);
  // Starts on a new span.
  void reset() { offset_ = index_ = 0; }
  RecordSpan span;
  uint32_t pid = 0;  // of the thread's process

 private:
  uint32_t offset_ = 0;
  uint32_t index_ = 0;
};

// The block a thread stream is walking, once its header passed the checks (open()), shared
// by the live and file streams.
class OpenBlock {
 public:
  // Checks the block found at ring position start (len bytes at data) and opens it. It must
  // hold at least a header, its header must name that position, and its first_seq must
  // continue the stream: at or after *expected_seq for a new block, at or before it when
  // resuming inside a block whose first records were taken before, and at most seq_limit. A
  // gap before a new block is counted as overwritten. False for a damaged or stale block,
  // counted as corrupt.
  bool open(const uint8_t* data, uint64_t len, uint64_t start, bool resuming, uint64_t seq_limit,
            uint64_t* expected_seq, ThreadStats* stats);
  bool is_open() const { return open_; }
  uint64_t position() const { return pos_; }
  uint64_t next_seq() const { return seq_; }  // after walk(): seq of the record that follows
  // Whether the walk would skip records of this block (some lie before skip_before).
  bool starts_before(uint64_t skip_before) const { return pos_ + offset_ < skip_before; }
  // Fills span with the block's records (those from skip_before on), then closes the block;
  // counts a malformed record as a corrupt block.
  void walk(const RecordSizer& sizer, uint64_t skip_before, RecordSpan* span, ThreadStats* stats);
  // Hands out the rest of the block without walking it (span.bytes: to the end of the block,
  // span.records: 0), then closes the block: for a consumer that checks each record itself.
  void hand_out(RecordSpan* span);

 private:
  bool open_ = false;
  const uint8_t* data_ = nullptr;
  uint64_t pos_ = 0;  // ring position of data_[0]
  uint32_t len_ = 0;
  uint32_t offset_ = 0;  // parse offset
  uint64_t base_ticks_ = 0;
  uint64_t seq_ = 0;  // seq of the record at offset_
};

// A thread stream that can hand out its blocks before they are walked, so that a consumer
// checks and decodes each record in one pass instead of two (ColumnReader). The consumer
// applies the walk's rules with unchecked_sizer(): a block's records end at an end marker
// (a zero first word) or where fewer than 8 bytes are left; a record whose size() is 0 is
// malformed and ends the block as corrupt. It reports how the block ended with
// finish_unchecked() before asking for the next one. A span that next_unchecked() had to walk
// anyway (records.bytes exact) passes the same checks.
class UncheckedSpanSource {
 public:
  // The sizer to check records with, or null if this stream cannot hand out unchecked spans
  // (its records are rewritten after the walk): then use SpanSource::next.
  virtual const RecordSizer* unchecked_sizer() const = 0;
  // The next block's records, unchecked; false at the end.
  virtual bool next_unchecked(RecordSpan* span) = 0;
  // The consumer took the first `records` records of the last span; corrupt: it stopped at
  // a malformed record.
  virtual void finish_unchecked(uint32_t records, bool corrupt) = 0;

 protected:
  ~UncheckedSpanSource() = default;
};

// next() of a thread stream: its spans' records, decoded one at a time.
template <class Stream>
bool next_decoded(Stream& stream, SpanRecords& records, const Trace& trace, uint32_t index,
                  Record* r) {
  while (!records.next(trace, index, r)) {
    if (!stream.next_span(&records.span)) return false;
    records.reset();
  }
  return true;
}

}  // namespace nanotrace::reader
