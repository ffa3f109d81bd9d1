// Block-header checks, record sizes, the block walk and record decoding: the one definition
// of a valid block and record that live rings and trace files are read with.
#include "reader/record_walk.hpp"

#include <cstring>

#include "reader/thread_stream.hpp"

namespace nanotrace::reader {
RecordSizer::RecordSizer(const std::vector<EventInfo>& events) {
  uint32_t max_id = 0;
  for (const EventInfo& e : events) max_id = e.id > max_id ? e.id : max_id;
  layouts_.assign(max_id + 1, Entry{});
  for (const EventInfo& e : events) {
    if (e.is_guard || e.id == 0 || e.id > events.size() || &events[e.id - 1] != &e) continue;
    layouts_[e.id].layout = e.layout;
  }
}

WalkEnd walk_block(const RecordSizer& sizer, const uint8_t* buf, uint32_t len, uint64_t block_pos,
                   uint64_t skip_before, uint64_t base_ticks, uint32_t* offset, uint64_t* seq,
                   RecordSpan* span) {
  uint32_t at = *offset;
  uint64_t n = *seq;
  span->data = buf + at;
  span->bytes = 0;
  span->records = 0;
  span->base_ticks = base_ticks;
  span->first_seq = n;
  WalkEnd end = WalkEnd::kBlock;
  uint32_t begin = at;
  while (at + 8 <= len && load_u64(buf + at) != 0) {
    // Each record's address depends on the previous one's size, so the loads would wait on
    // memory one at a time: fetch ahead (a prefetch past the end of the block is harmless).
    __builtin_prefetch(buf + at + 512);
    uint32_t size = sizer.size(buf, at, len);
    if (size == 0) {
      end = WalkEnd::kCorrupt;
      break;
    }
    if (block_pos + at < skip_before) {  // taken by an earlier consumer
      begin = at + size;
      span->data = buf + begin;
      span->first_seq = n + 1;
    } else {
      ++span->records;
    }
    at += size;
    ++n;
  }
  span->bytes = at - begin;
  *offset = at;
  *seq = n;
  return end;
}

bool OpenBlock::open(const uint8_t* data, uint64_t len, uint64_t start, bool resuming,
                     uint64_t seq_limit, uint64_t* expected_seq, ThreadStats* stats) {
  open_ = false;
  abi::BlockHeader bh;
  if (len < sizeof(bh)) {
    ++stats->corrupt_blocks;
    return false;
  }
  std::memcpy(&bh, data, sizeof(bh));
  bool seq_ok = resuming ? bh.first_seq <= *expected_seq : bh.first_seq >= *expected_seq;
  if (bh.position != start || !seq_ok || bh.first_seq > seq_limit) {
    ++stats->corrupt_blocks;
    return false;
  }
  if (!resuming && bh.first_seq > *expected_seq) {
    stats->overwritten += bh.first_seq - *expected_seq;
    *expected_seq = bh.first_seq;
  }
  open_ = true;
  data_ = data;
  pos_ = start;
  len_ = static_cast<uint32_t>(len);
  offset_ = abi::kBlockHeaderBytes;
  base_ticks_ = bh.base_ticks;
  seq_ = bh.first_seq;
  return true;
}

void OpenBlock::walk(const RecordSizer& sizer, uint64_t skip_before, RecordSpan* span,
                     ThreadStats* stats) {
  if (walk_block(sizer, data_, len_, pos_, skip_before, base_ticks_, &offset_, &seq_, span) ==
      WalkEnd::kCorrupt) {
    ++stats->corrupt_blocks;
  }
  open_ = false;
}

void OpenBlock::hand_out(RecordSpan* span) {
  span->data = data_ + offset_;
  span->bytes = len_ > offset_ ? len_ - offset_ : 0;
  span->records = 0;
  span->base_ticks = base_ticks_;
  span->first_seq = seq_;
  open_ = false;
}

uint32_t decode_record(const Trace& trace, const uint8_t* buf, uint32_t offset, uint32_t limit,
                       uint64_t base_ticks, Record* r) {
  if (offset + 8 > limit) return 0;
  uint64_t word0 = load_u64(buf + offset);
  const EventInfo* ev = trace.event_by_id(static_cast<uint16_t>(word0 & 0xffff));
  if (ev == nullptr || ev->is_guard) return 0;
  const abi::RecordLayout& layout = ev->layout;
  r->event = ev;
  r->ticks = abi::expand_ticks(base_ticks, word0 >> 16);
  r->field_count = layout.field_count();
  FieldValue* values = r->values;
  return layout.decode(
      buf, offset, limit,
      [&](uint32_t f, uint64_t bits) {
        values[f].type = layout.type(f);
        values[f].bits = bits;
        values[f].text = std::string_view();
      },
      [&](uint32_t f, std::string_view text) {
        values[f].type = abi::FieldType::kString;
        values[f].bits = text.size();
        values[f].text = text;
      });
}

bool SpanRecords::next(const Trace& trace, uint32_t thread, Record* r) {
  if (offset_ >= span.bytes) return false;
  uint32_t size = decode_record(trace, span.data, offset_, span.bytes, span.base_ticks, r);
  if (size == 0) {  // cannot happen: the walk checked the record with the same rules
    offset_ = span.bytes;
    return false;
  }
  offset_ += size;
  r->seq = span.first_seq + index_++;
  r->thread = thread;
  r->pid = pid;
  r->time_ns = trace.ticks_to_ns(r->ticks);
  return true;
}

}  // namespace nanotrace::reader
