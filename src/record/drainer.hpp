// Moving ring bytes from a live (or dead) segment into a trace file: one pass over every
// thread slot copies what each ring holds beyond what was already taken, as raw DATA
// chunks, and accounts for the copied records (to count them, to keep the consumer position
// exact, and to evaluate triggers). Internal header shared by record, snapshot, recover.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/file_format.hpp"
#include "nanotrace/reader.hpp"
#include "reader/record_walk.hpp"
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
  uint64_t walk_pos = 0;   // records before it are accounted for
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

// Ring bytes [from, to) as the drainer reads them: in place in the ring mapping, or in a
// copy. Position p is at base[(p - origin) & mask]. A block never straddles the ring's end,
// so the bytes of one block are contiguous either way.
struct RingView {
  const uint8_t* base;
  uint64_t origin;
  uint64_t mask;
  uint64_t from;
  uint64_t to;
  const uint8_t* at(uint64_t p) const { return base + ((p - origin) & mask); }
};

// How the bytes of a stable ring range reach the file: NANOTRACE_RECORD_COPY=writev (the
// default, measured cheapest: docs/format.md, "How the recorder copies"), buffered,
// copy_file_range or splice.
enum class CopyPath {
  kWritev,         // writev straight from the ring mapping (default)
  kBuffered,       // copied to a buffer first, as overwrite mode must
  kCopyFileRange,  // copy_file_range from the segment's descriptor
  kSplice,         // splice from the segment's descriptor through a pipe
};

// A slot as it was just before the recorder attached as consumer: only a generation that
// existed then may have been consumed by someone else, and only its drops up to then are
// not the recording's.
struct SlotAtAttach {
  uint32_t generation = 0;
  uint32_t state = 0;
  uint64_t dropped = 0;
};
std::vector<SlotAtAttach> slots_at_attach(const Trace& trace);

class Drainer {
 public:
  // consume: advance the consumer position (REQUIRES: trace attached as consumer).
  // at_attach: slots_at_attach() taken before attaching (empty: the first pass's view).
  Drainer(Trace& trace, FileWriter& out, bool consume, std::vector<SlotAtAttach> at_attach = {});
  ~Drainer();
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  // Which process of a multi-process file this drainer's chunks belong to (0..65535; 0 for
  // a one-process file): the high 16 bits of their slot (docs/format.md, "Trace file").
  void set_process_index(uint32_t index) { process_tag_ = index << 16; }

  // Writes a META chunk if the tables changed since the last one (or if force).
  Status write_meta(bool force);
  // One pass over all slots. final: also account for the records of blocks the writer may
  // still be filling (else that waits until a block is complete, the thread has exited or a
  // hook is set), so records() and the consumer position are exact. *moved: DATA bytes
  // written. *stopped: the hook asked to stop.
  Status pass(const RecordHook& hook, bool final, uint64_t* moved, bool* stopped);
  // Writes the loss counters of every stream seen and of the process.
  Status write_loss();
  Status write_end(file::EndReason reason);

  // Every stream seen: finished ones, then the ones still followed.
  std::vector<StreamState> all_streams() const;
  uint64_t records() const;
  uint64_t lost_no_slot() const;
  uint64_t lost_reclaimed() const;
  // The most bytes one stream moved in the last pass (how fast the busiest ring fills).
  uint64_t max_stream_moved() const { return max_stream_moved_; }
  // A writer of a followed stream sleeps until we make room (block mode).
  bool writer_waiting() const;
  uint64_t ring_size() const { return ring_size_; }

 private:
  // initial: found by the first pass (may have been partly consumed before we attached).
  Status start_stream(uint32_t slot, uint32_t generation, bool initial, StreamState* st);
  Status drain(StreamState& st, const RecordHook& hook, bool final, uint64_t* moved, bool* stopped);
  // True if stable ring bytes go to the file straight from the ring (a consumer in block or
  // discard mode); false if they are copied out and validated first.
  bool direct() const {
    return consume_ && mode_ != abi::Mode::kOverwrite && copy_path_ != CopyPath::kBuffered;
  }
  // Copies n bytes at offset of the segment file into dst (zeros past a truncated end).
  void copy_out(uint8_t* dst, uint64_t offset, uint64_t n) const;
  // drain()'s two halves: the copy of a ring's new bytes (not direct; false if the slot was
  // reused meanwhile), and their accounting and writing as DATA chunks.
  bool copy_new_bytes(StreamState& st, const abi::ThreadSlot& s, uint64_t* head, RingView* view);
  Status write_chunks(StreamState& st, const RingView& view, uint64_t head, const RecordHook& hook,
                      bool tail, uint64_t* moved, bool* stopped);
  // Accounts for the records in [st.walk_pos, stop) (bytes readable in view). Whole blocks
  // are counted from sequence numbers in the block headers (the next block's first_seq minus
  // this one's) when no hook needs the records; other records are walked one by one, the
  // records of a block whose end is not in view only if tail. Returns the position right
  // after the record the hook stopped on, or stop.
  uint64_t account(StreamState& st, const RingView& view, uint64_t stop, const RecordHook& hook,
                   bool tail, bool* stopped);
  // Counts the records from pos to the end of block b (pos is b or inside it, the next
  // block's header in view) from the headers' sequence numbers, if they check out.
  bool count_rest_of_block(StreamState& st, const RingView& view, uint64_t pos, uint64_t b);
  // Takes the header of block b (at a block boundary): false, counted corrupt, if it is from
  // an older lap or damaged.
  bool enter_block(StreamState& st, const RingView& view, uint64_t b);
  void publish(StreamState& st);
  // Reads the record sizes of the trace's current event table (the reader's RecordSizer).
  void build_sizes();

  Trace& trace_;
  FileWriter& out_;
  bool consume_;
  uint32_t process_tag_ = 0;  // process index << 16
  CopyPath copy_path_ = CopyPath::kWritev;
  int segment_fd_ = -1;  // for kCopyFileRange and kSplice
  const abi::SegmentHeader* header_;
  abi::ThreadSlot* slots_;
  const uint8_t* rings_;
  uint64_t ring_size_;
  uint64_t block_;
  uint64_t chunk_;  // most DATA bytes per chunk (a multiple of block_)
  abi::Mode mode_;
  bool writer_gone_;
  std::vector<StreamState> live_;      // by slot
  std::vector<StreamState> finished_;  // streams whose slot was reused
  std::vector<uint8_t> buf_;
  reader::RecordSizer sizer_;  // record sizes by event id
  uint64_t meta_sig_ = ~uint64_t{0};
  uint32_t meta_events_ = 0;  // events_count in the last META chunk
  uint64_t records_ = 0;
  uint64_t passes_ = 0;
  uint64_t max_stream_moved_ = 0;
  std::vector<uint32_t> claim_waits_;
  std::vector<SlotAtAttach> at_attach_;  // by slot: passes spent waiting for a claim to finish
};

}  // namespace nanotrace::rec
