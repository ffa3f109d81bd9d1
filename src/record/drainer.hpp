// Moving ring bytes from a live (or dead) segment into a trace file: one pass over every
// thread slot copies what each ring holds beyond what was already taken, as raw DATA
// chunks, and walks the copied records (to count them, to keep the consumer position
// exact, and to evaluate triggers). Internal header shared by record, snapshot, recover.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/file_format.hpp"
#include "nanotrace/reader.hpp"
#include "record/file_writer.hpp"

namespace nanotrace::rec {

// What the drainer knows of one thread generation.
struct StreamState {
  bool active = false;  // this slot generation is being followed
  uint32_t slot = 0;
  uint32_t generation = 0;
  uint32_t tid = 0;
  std::string name;
  uint64_t first_pos = 0;  // records before it belong to an earlier consumer
  uint64_t copied = 0;     // next position to copy
  uint64_t walk_pos = 0;   // next position to walk
  uint64_t seq = 0;        // per-thread seq of the record at walk_pos
  uint64_t base_ticks = 0;
  bool in_block = false;  // the header of walk_pos's block was read
  uint64_t records = 0;   // records copied into the file
  uint64_t overwritten = 0;
  uint64_t dropped_at_start = 0;
  uint64_t written = 0;  // last seen ThreadSlot::written
  uint64_t dropped = 0;  // last seen ThreadSlot::dropped
  uint32_t state = 0;
  uint64_t corrupt_blocks = 0;
  uint64_t reclaimed = 0;  // records the stream still had unread when its slot was reused
};

// Called for each record walked (after the records before first_pos are skipped). Return
// true to stop right after this record.
using RecordHook = std::function<bool(const Record& record, const StreamState& stream)>;

class Drainer {
 public:
  // consume: advance the consumer position (REQUIRES: trace attached as consumer).
  Drainer(Trace& trace, FileWriter& out, bool consume);

  // Writes a META chunk if the tables changed since the last one (or if force).
  Status write_meta(bool force);
  // One pass over all slots. *moved: DATA bytes written. *stopped: the hook asked to stop.
  Status pass(const RecordHook& hook, uint64_t* moved, bool* stopped);
  // Writes the loss counters of every stream seen and of the process.
  Status write_loss();
  Status write_end(file::EndReason reason);

  // Every stream seen: finished ones, then the ones still followed.
  std::vector<StreamState> all_streams() const;
  uint64_t records() const;
  uint64_t lost_no_slot() const;
  uint64_t lost_reclaimed() const;

 private:
  // initial: found by the first pass (may have been partly consumed before we attached).
  Status start_stream(uint32_t slot, uint32_t generation, bool initial, StreamState* st);
  Status drain(StreamState& st, const RecordHook& hook, uint64_t* moved, bool* stopped);
  // Walks records in [from, to), bytes at data (data[0] is position from). Returns the
  // position right after the record the hook stopped on, or to.
  uint64_t walk(StreamState& st, const uint8_t* data, uint64_t from, uint64_t to,
                const RecordHook& hook, bool* stopped);
  void publish(StreamState& st);
  // Size of the record at blk[off] (limit: end of valid bytes), 0 if unknown or malformed.
  uint32_t record_size(const uint8_t* blk, uint32_t off, uint32_t limit) const;
  void build_sizes();
  static constexpr uint32_t kVariableSize = ~uint32_t{0};

  Trace& trace_;
  FileWriter& out_;
  bool consume_;
  bool direct_ok_ = true;  // not NANOTRACE_RECORD_BUFFERED=1 (see drainer.cc)
  const abi::SegmentHeader* header_;
  abi::ThreadSlot* slots_;
  const uint8_t* rings_;
  uint64_t ring_size_;
  uint64_t block_;
  abi::Mode mode_;
  bool writer_gone_;
  std::vector<StreamState> live_;      // by slot
  std::vector<StreamState> finished_;  // streams whose slot was reused
  std::vector<uint8_t> buf_;
  std::vector<uint32_t> sizes_;  // by event id: record bytes, kVariableSize, 0 = not an event
  uint64_t meta_sig_ = ~uint64_t{0};
  uint64_t records_ = 0;
  uint64_t passes_ = 0;
  std::vector<uint32_t> claim_waits_;  // by slot: passes spent waiting for a claim to finish
};

// The oldest block position a writer cannot be overwriting (see reader/ring_cursor.cc).
uint64_t oldest_safe_block(abi::Mode mode, bool writer_gone, uint64_t head, uint64_t consumed,
                           uint64_t block, uint64_t ring_size);

}  // namespace nanotrace::rec
