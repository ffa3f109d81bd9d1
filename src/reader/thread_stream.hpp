// One thread's records out of a live ring, in order, block by block. Internal header.
//
// Each block is copied whole into a private buffer (with the writer gone, several at once),
// then validated against the writer's state read after the copy: the slot's generation must not
// have changed, and the block must lie outside the region the writer may be overwriting. A block
// that fails is skipped and the records it held are counted as overwritten (from the next block's
// first_seq).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/byte_arena.hpp"
#include "nanotrace/reader.hpp"
#include "reader/record_walk.hpp"

namespace nanotrace::reader {

// The oldest block position the writer cannot be overwriting, given its head and the
// consumer's position (see ring_cursor.cc). Shared by the live reader and the recorder.
uint64_t oldest_safe_block(abi::Mode mode, bool writer_gone, uint64_t head, uint64_t consumed,
                           uint64_t block, uint64_t ring_size);

// Both thread streams: records one by one (for the merge), or as raw spans.
template <class Stream>
class SpanSourceOf : public SpanSource {
 public:
  explicit SpanSourceOf(std::unique_ptr<Stream> stream) : stream_(std::move(stream)) {}
  bool next(RecordSpan* span) override { return stream_->next_span(span); }
  const ThreadStats& stats() const override { return stream_->stats(); }

 private:
  std::unique_ptr<Stream> stream_;
};

// Where a reader that does not consume stopped in a thread's ring (the next record's ring
// position and sequence number), so that its next pass reads only what came after.
struct RingPosition {
  uint64_t position = 0;
  uint64_t seq = 0;
};

class LiveThreadStream {
 public:
  // REQUIRES: slot < trace.process().max_threads. consume: advance the slot's consumer
  // position as records are read (the caller is the attached consumer). chunk_bytes: how
  // much of a dead writer's ring one read copies (the buffer, freed at the end; one block
  // while the writer lives).
  LiveThreadStream(Trace& trace, const ThreadInfo& info, bool consume, uint32_t index,
                   uint32_t chunk_bytes);
  // A reader that follows the ring without consuming it: starts at `from` (an earlier pass's
  // end(), or {0, 0} for everything the ring still holds). Records the writer overwrote
  // since are counted as overwritten, as for any reader that fell behind. The writer's drops
  // are all counted (ThreadInfo::dropped), not those since `from`. keep: if not null, blocks
  // are copied to its end and stay there after the stream moves on (spans point into it
  // until it next grows: its user keeps their offsets), for a reader that reads several
  // threads' records in time order once all are copied.
  LiveThreadStream(Trace& trace, const ThreadInfo& info, const RingPosition& from, uint32_t index,
                   uint32_t chunk_bytes, ByteArena* keep = nullptr);
  // Where the next pass starts: after the last record read (complete once next() or
  // next_span() returned false).
  RingPosition end() const { return {pos_, expected_seq_}; }

  // Next record, or false at the position the writer had reached when the stream began.
  bool next(Record* record);
  // The next records of the current block, not decoded; false at the same end as next().
  bool next_span(RecordSpan* span);
  const ThreadStats& stats() const { return stats_; }

 private:
  bool load_block();
  void publish_consumed();
  // The slot, ring and mode facts both constructors share; start at pos_ (moved to the
  // oldest block the writer is not overwriting if it lies before it).
  void attach(const ThreadInfo& info);
  void start_at_safe_block(uint64_t consumed);
  // The block [start, start + len), copied (and, with the writer gone, the blocks after it)
  // unless the last copy holds it. Null if the file is short.
  const uint8_t* copy_block(uint64_t start, uint32_t len);

  Trace& trace_;
  RecordSizer sizer_;
  SpanRecords records_;
  const abi::ThreadSlot* slot_;
  abi::ThreadSlot* writable_slot_;
  uint64_t ring_offset_;  // of the ring in the segment file
  uint64_t mask_;
  uint64_t block_size_;
  uint64_t ring_size_;
  abi::Mode mode_;
  bool writer_gone_ = false;
  uint64_t end_;  // snapshot of the writer's head
  uint64_t pos_;  // position of the next record to return
  uint64_t expected_seq_;
  uint32_t index_;
  ThreadStats stats_;
  uint64_t chunk_bytes_;
  std::vector<uint8_t> buf_;  // copied blocks (without keep_)
  ByteArena* keep_ = nullptr;
  uint64_t copied_at_ = 0;   // where the last copy is in keep_
  uint64_t copied_pos_ = 0;  // ring position of the last copy's first byte
  uint64_t copied_len_ = 0;  // bytes in the last copy
  const uint8_t* copied() const { return keep_ ? keep_->data() + copied_at_ : buf_.data(); }
  OpenBlock block_;  // in buf_
  bool done_ = false;
};

}  // namespace nanotrace::reader
