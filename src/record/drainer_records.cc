// The drainer's record accounting (see drainer.hpp): how many records the copied ring bytes
// hold, and at which position the consumer may say it has read up to which record.
//
// Walking every record costs as much as the checksum. Without a hook nothing needs the
// records themselves, and the writer already counts them: a block header carries the number
// of the block's first record, so a complete block holds the next block's first_seq minus its
// own. Only a block whose end is not in view yet (the writer may still be filling it) has to
// be walked, and only when the count must be exact right now (the end of a recording, a
// thread that exited); otherwise it is counted once its successor's header appears. Every
// header is checked against the position and sequence numbers expected before it is
// believed; a block that does not check out is walked (and rejected) record by record.
#include <cstring>

#include "reader/thread_stream.hpp"
#include "record/drainer.hpp"

namespace nanotrace::rec {
namespace {

abi::BlockHeader load_header(const RingView& view, uint64_t pos) {
  abi::BlockHeader h;
  std::memcpy(&h, view.at(pos), sizeof(h));
  return h;
}

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

void Drainer::build_sizes() { sizer_ = reader::RecordSizer(trace_); }

bool Drainer::count_rest_of_block(StreamState& st, const RingView& view, uint64_t pos, uint64_t b) {
  // The most records a block can hold: the smallest record is one word.
  const uint64_t max_records = (block_ - abi::kBlockHeaderBytes) / 8;
  const uint64_t next = b + block_;
  abi::BlockHeader nh = load_header(view, next);
  uint64_t seq = st.seq;
  bool ok = nh.position == next;
  if (ok && pos == b) {
    abi::BlockHeader bh = load_header(view, b);
    ok = bh.position == b && bh.first_seq >= st.seq && bh.first_seq <= st.seq + (1ull << 40);
    seq = bh.first_seq;
  }
  // Otherwise the caller walks it: a stale or damaged header is rejected there.
  if (!ok || nh.first_seq < seq || nh.first_seq - seq > max_records) return false;
  if (seq > st.seq) st.overwritten += seq - st.seq;  // the writer lapped us (overwrite)
  st.records += nh.first_seq - seq;
  records_ += nh.first_seq - seq;
  st.seq = nh.first_seq;
  st.in_block = false;
  return true;
}

bool Drainer::enter_block(StreamState& st, const RingView& view, uint64_t b) {
  abi::BlockHeader bh = load_header(view, b);
  bool resuming = b < st.first_pos;  // an earlier consumer took part of this block
  bool seq_ok = resuming ? bh.first_seq <= st.seq : bh.first_seq >= st.seq;
  if (bh.position != b || !seq_ok || bh.first_seq > st.seq + (1ull << 40)) {
    // A block from an older lap or damaged: its records cannot be trusted.
    ++st.corrupt_blocks;
    st.in_block = false;
    return false;
  }
  if (bh.first_seq > st.seq && b >= st.first_pos) st.overwritten += bh.first_seq - st.seq;
  st.seq = bh.first_seq;
  st.base_ticks = bh.base_ticks;
  st.in_block = true;
  return true;
}

uint64_t Drainer::account(StreamState& st, const RingView& view, uint64_t stop,
                          const RecordHook& hook, bool tail, bool* stopped) {
  uint64_t pos = st.walk_pos;
  if (pos < view.from) {  // bytes [walk_pos, from) were cut off: resume at a block header
    pos = view.from;
    st.in_block = false;
  }
  Record r;
  bool refreshed = false;
  while (pos < stop) {
    const uint64_t b = pos & ~(block_ - 1);
    const uint64_t next = b + block_;
    const bool next_in_view = next + abi::kBlockHeaderBytes <= view.to && next <= stop;
    // Count the rest of the block from the next block's first_seq. Not in a block an earlier
    // consumer took part of: there the records before first_pos must be skipped one by one.
    if (!hook && next_in_view && pos >= st.first_pos && (pos == b || st.in_block) &&
        count_rest_of_block(st, view, pos, b)) {
      pos = next;
      continue;
    }
    if (!hook && !tail && !next_in_view) break;  // the writer may still be filling it
    if (pos == b) {
      if (view.to - pos < abi::kBlockHeaderBytes) break;
      pos = enter_block(st, view, b) ? pos + abi::kBlockHeaderBytes : next;
      continue;
    }
    if (!st.in_block) {
      pos = next;
      continue;
    }
    if (pos + 8 > next) {
      pos = next;
      st.in_block = false;
      continue;
    }
    uint64_t end = next < stop ? next : stop;
    if (end > view.to) end = view.to;
    if (pos + 8 > end) break;
    const uint8_t* p = view.at(pos);
    if (load_u64(p) == 0) {  // end marker
      pos = next;
      st.in_block = false;
      continue;
    }
    auto limit = static_cast<uint32_t>(end - pos);
    // Without a hook only the record's size is needed (no decoding).
    uint32_t size = hook ? reader::decode_record(trace_, p, 0, limit, st.base_ticks, &r)
                         : sizer_.size(p, 0, limit);
    if (size == 0 && !refreshed) {
      // An event registered after the tables were last read: reload them once.
      refreshed = true;
      if (trace_.refresh().ok()) {
        build_sizes();
        (void)write_meta(false);
        continue;
      }
    }
    if (size == 0) {
      ++st.corrupt_blocks;
      pos = next;
      st.in_block = false;
      continue;
    }
    pos += size;
    r.seq = st.seq++;
    if (pos <= st.first_pos) continue;  // taken by an earlier consumer
    ++st.records;
    ++records_;
    if (hook && hook(r, st)) {
      *stopped = true;
      st.walk_pos = pos;
      return pos;
    }
  }
  st.walk_pos = pos;
  return stop;
}

}  // namespace nanotrace::rec
