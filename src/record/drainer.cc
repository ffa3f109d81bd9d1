// The drainer: copies ring bytes into DATA chunks and walks them (see drainer.hpp).
//
// Safety of a copy. With a consumer attached and the target in block or discard mode, the
// writer never writes below the consumer's block, so [consumed block, head) is stable: it is
// walked and written to the file straight from the mapping. Otherwise (overwrite mode, or a
// snapshot that does not consume) the bytes are copied to a buffer in one go, then validated
// like the live reader does: the slot generation must be unchanged and the copied blocks must
// lie at or after the oldest block the writer cannot be overwriting; the rest is cut off, and
// the records it held show up as a sequence gap (counted as overwritten) when read back.
#include "record/drainer.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "common/process.hpp"
#include "reader/thread_stream.hpp"

namespace nanotrace::rec {
namespace {

constexpr uint64_t kMaxPosition = uint64_t{1} << 62;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// A compact copy of the segment's table region: header, group table, the events published
// so far and the used part of the string pool, with offsets rewritten to this layout.
void build_meta(const uint8_t* base, std::vector<uint8_t>* out, uint64_t* sig) {
  auto* live = reinterpret_cast<const abi::SegmentHeader*>(base);
  abi::SegmentHeader h;
  std::memcpy(&h, base, sizeof(h));
  uint32_t events = __atomic_load_n(&live->events_count, __ATOMIC_ACQUIRE);
  uint32_t strings = __atomic_load_n(&live->strings_used, __ATOMIC_ACQUIRE);
  uint32_t groups = __atomic_load_n(&live->groups_count, __ATOMIC_ACQUIRE);
  if (events > h.events_capacity) events = h.events_capacity;
  if (strings > h.strings_capacity) strings = h.strings_capacity;
  if (groups > abi::kMaxGroups) groups = abi::kMaxGroups;
  // clock_latest under its seqlock.
  for (int i = 0; i < 100; ++i) {
    uint32_t a = __atomic_load_n(&live->clock_seq, __ATOMIC_ACQUIRE);
    abi::ClockPair pair = live->clock_latest;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if ((a & 1) == 0 && __atomic_load_n(&live->clock_seq, __ATOMIC_RELAXED) == a) {
      h.clock_latest = pair;
      break;
    }
    h.clock_latest = h.clock_start;
  }
  h.clock_seq = 0;
  h.lost_no_slot = __atomic_load_n(&live->lost_no_slot, __ATOMIC_RELAXED);
  h.lost_reclaimed = __atomic_load_n(&live->lost_reclaimed, __ATOMIC_RELAXED);
  uint64_t groups_off = sizeof(abi::SegmentHeader);
  uint64_t events_off = groups_off + abi::kMaxGroups * sizeof(abi::GroupEntry);
  uint64_t strings_off = events_off + uint64_t{events} * sizeof(abi::EventEntry);
  uint64_t end = align_up(strings_off + strings, 64);
  out->assign(end, 0);
  uint64_t s = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { s = (s ^ v) * 1099511628211ull; };
  mix(events);
  mix(strings);
  mix(groups);
  auto* g = reinterpret_cast<const abi::GroupEntry*>(base + h.groups_offset);
  for (uint32_t i = 0; i < groups; ++i) mix(__atomic_load_n(&g[i].enabled, __ATOMIC_RELAXED));
  *sig = s;
  std::memcpy(out->data() + groups_off, base + h.groups_offset,
              abi::kMaxGroups * sizeof(abi::GroupEntry));
  std::memcpy(out->data() + events_off, base + h.events_offset,
              uint64_t{events} * sizeof(abi::EventEntry));
  std::memcpy(out->data() + strings_off, base + h.strings_offset, strings);
  h.groups_offset = groups_off;
  h.groups_count = groups;
  h.events_offset = events_off;
  h.events_capacity = events;
  h.events_count = events;
  h.strings_offset = strings_off;
  h.strings_capacity = strings;
  h.strings_used = strings;
  h.threads_offset = end;
  h.rings_offset = end;
  h.segment_size = end;
  h.consumer_pid = 0;
  std::memcpy(out->data(), &h, sizeof(h));
}

}  // namespace

uint64_t oldest_safe_block(abi::Mode mode, bool writer_gone, uint64_t head, uint64_t consumed,
                           uint64_t block, uint64_t ring_size) {
  uint64_t oldest_in_ring = head > ring_size ? align_up(head - ring_size, block) : 0;
  if (mode != abi::Mode::kOverwrite) {
    uint64_t from_consumer = consumed & ~(block - 1);
    return from_consumer > oldest_in_ring ? from_consumer : oldest_in_ring;
  }
  if (writer_gone) return oldest_in_ring;
  uint64_t limit = align_up(head, block) + block;
  return limit > ring_size ? limit - ring_size : 0;
}

Drainer::Drainer(Trace& trace, FileWriter& out, bool consume)
    : trace_(trace), out_(out), consume_(consume && trace.writable_base() != nullptr) {
  header_ = reinterpret_cast<const abi::SegmentHeader*>(trace.base());
  const ProcessInfo& p = trace.process();
  slots_ = reinterpret_cast<abi::ThreadSlot*>(const_cast<uint8_t*>(trace.base()) +
                                              header_->threads_offset);
  rings_ = trace.base() + header_->rings_offset;
  ring_size_ = p.ring_size;
  block_ = p.block_size;
  mode_ = p.mode;
  writer_gone_ = !p.alive;
  live_.resize(p.max_threads);
  claim_waits_.resize(p.max_threads);
  build_sizes();
  // When the ring bytes are stable (we consume, block or discard mode) they go to the file
  // straight from the mapping (writev), without a user-space copy. NANOTRACE_RECORD_BUFFERED=1
  // copies them to a buffer first, as overwrite mode must (scripts/record-bench.sh compares
  // both: no measurable difference on the test machine).
  const char* env = std::getenv("NANOTRACE_RECORD_BUFFERED");
  direct_ok_ = env == nullptr || env[0] != '1';
}

Status Drainer::write_meta(bool force) {
  std::vector<uint8_t> meta;
  uint64_t sig = 0;
  build_meta(trace_.base(), &meta, &sig);
  if (!force && sig == meta_sig_) return Status::Ok();
  meta_sig_ = sig;
  return out_.write_chunk(file::ChunkType::kMeta, meta.data(), static_cast<uint32_t>(meta.size()));
}

Status Drainer::start_stream(uint32_t slot, uint32_t generation, bool initial, StreamState* st) {
  const abi::ThreadSlot& s = slots_[slot];
  *st = StreamState();
  st->active = true;
  st->slot = slot;
  st->generation = generation;
  st->tid = s.tid;
  st->name.assign(s.name, ::strnlen(s.name, sizeof(s.name)));
  st->state = __atomic_load_n(&s.state, __ATOMIC_ACQUIRE);
  uint64_t head = __atomic_load_n(&s.head, __ATOMIC_ACQUIRE);
  uint64_t consumed = __atomic_load_n(&s.consumed, __ATOMIC_ACQUIRE);
  st->dropped_at_start = consume_ ? s.dropped : 0;
  // A consumer's position also bounds a snapshot in block and discard modes: what lies before
  // it was taken by that consumer, not lost.
  // Only a generation that existed before we started can have been partly consumed by
  // someone else; a later one starts at 0 (its consumed field may still be the previous
  // generation's while the claim is in progress).
  if (initial && (consume_ || mode_ != abi::Mode::kOverwrite) && consumed <= head &&
      head < kMaxPosition) {
    st->first_pos = consumed;
    st->seq = __atomic_load_n(&s.consumed_records, __ATOMIC_ACQUIRE);
  }
  uint64_t safe = head < kMaxPosition
                      ? oldest_safe_block(mode_, writer_gone_, head, consumed, block_, ring_size_)
                      : 0;
  if (safe > head) safe = head & ~(block_ - 1);
  uint64_t from = st->first_pos & ~(block_ - 1);
  if (from < safe) from = safe;
  if (st->first_pos < from) {
    st->first_pos = from;
    if (!consume_) st->seq = 0;
  }
  st->copied = from;
  st->walk_pos = from;
  // Map the ring's pages now: a copy that page-faults every 4 KiB is slower than a writer at
  // full speed, and in overwrite mode would never catch up with it.
  uintptr_t ring = reinterpret_cast<uintptr_t>(rings_ + uint64_t{slot} * ring_size_);
  uintptr_t page = ring & ~uintptr_t{4095};
#ifdef MADV_POPULATE_READ
  (void)madvise(reinterpret_cast<void*>(page), ring + ring_size_ - page, MADV_POPULATE_READ);
#endif
  file::ThreadPayload t{};
  t.slot = slot;
  t.generation = generation;
  t.tid = st->tid;
  t.state = st->state;
  t.start_ticks = s.start_ticks;
  t.first_pos = st->first_pos;
  t.first_seq = st->seq;
  t.dropped_at_start = st->dropped_at_start;
  std::memcpy(t.name, s.name, sizeof(t.name));
  struct iovec v = {&t, sizeof(t)};
  return out_.write_chunk(file::ChunkType::kThread, slot, generation, 0, &v, 1);
}

void Drainer::build_sizes() {
  sizes_.assign(trace_.events().size() + 1, 0);
  for (const EventInfo& e : trace_.events()) {
    if (e.is_guard) continue;
    uint32_t size = 8;
    for (const FieldInfo& f : e.fields) {
      if (f.type == abi::FieldType::kString) {
        size = kVariableSize;
        break;
      }
      size += 8;
    }
    sizes_[e.id] = size;
  }
}

uint32_t Drainer::record_size(const uint8_t* blk, uint32_t off, uint32_t limit) const {
  auto id = static_cast<uint16_t>(load_u64(blk + off) & 0xffff);
  if (id >= sizes_.size() || sizes_[id] == 0) return 0;
  uint32_t size = sizes_[id];
  if (size != kVariableSize) return off + size <= limit ? size : 0;
  const EventInfo* e = trace_.event_by_id(id);
  uint32_t at = off + 8;
  for (const FieldInfo& f : e->fields) {
    if (f.type == abi::FieldType::kString) {
      if (at + 1 > limit || blk[at] > abi::kMaxStringBytes) return 0;
      at += abi::string_slot_bytes(blk[at]);
    } else {
      at += 8;
    }
    if (at > limit) return 0;
  }
  return at - off;
}

uint64_t Drainer::walk(StreamState& st, const uint8_t* data, uint64_t from, uint64_t to,
                       const RecordHook& hook, bool* stopped) {
  uint64_t pos = st.walk_pos;
  if (pos < from) {  // bytes [walk_pos, from) were cut off: resume at a block header
    pos = from;
    st.in_block = false;
  }
  Record r;
  bool refreshed = false;
  while (pos < to) {
    uint64_t b = pos & ~(block_ - 1);
    const uint8_t* blk = data + (b - from);  // may point before data: only read at >= from
    if (pos == b) {
      if (to - pos < abi::kBlockHeaderBytes) break;
      abi::BlockHeader bh;
      std::memcpy(&bh, data + (pos - from), sizeof(bh));
      bool resuming = b < st.first_pos;  // an earlier consumer took part of this block
      bool seq_ok = resuming ? bh.first_seq <= st.seq : bh.first_seq >= st.seq;
      if (bh.position != b || !seq_ok || bh.first_seq > st.seq + (1ull << 40)) {
        // A block from an older lap or damaged: its records cannot be trusted.
        ++st.corrupt_blocks;
        pos = b + block_;
        st.in_block = false;
        continue;
      }
      if (bh.first_seq > st.seq && pos >= st.first_pos) {
        st.overwritten += bh.first_seq - st.seq;
      }
      st.seq = bh.first_seq;
      st.base_ticks = bh.base_ticks;
      st.in_block = true;
      pos += abi::kBlockHeaderBytes;
      continue;
    }
    if (!st.in_block) {
      pos = b + block_;
      continue;
    }
    uint64_t off = pos - b;
    if (off + 8 > block_) {
      pos = b + block_;
      st.in_block = false;
      continue;
    }
    if (pos + 8 > to) break;
    if (load_u64(data + (pos - from)) == 0) {
      pos = b + block_;
      st.in_block = false;
      continue;
    }
    uint64_t limit = (to - b < block_ ? to - b : block_);
    // Without a hook only the record's size is needed (no decoding on the hot path).
    uint32_t size =
        hook ? reader::decode_record(trace_, blk, static_cast<uint32_t>(off),
                                     static_cast<uint32_t>(limit), st.base_ticks, &r)
             : record_size(blk, static_cast<uint32_t>(off), static_cast<uint32_t>(limit));
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
      pos = b + block_;
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
  return to;
}

void Drainer::publish(StreamState& st) {
  if (!consume_) return;
  abi::ThreadSlot* s = &slots_[st.slot];
  if (__atomic_load_n(&s->generation, __ATOMIC_ACQUIRE) != st.generation) return;
  uint64_t pos = st.walk_pos < st.copied ? st.walk_pos : st.copied;
  __atomic_store_n(&s->consumed_records, st.seq, __ATOMIC_RELEASE);
  __atomic_store_n(&s->consumed, pos, __ATOMIC_RELEASE);
  __atomic_fetch_add(&s->consumer_seq, 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&s->writer_waiting, __ATOMIC_SEQ_CST) != 0) {
    sys::futex_wake_all(&s->consumer_seq);
  }
}

Status Drainer::drain(StreamState& st, const RecordHook& hook, uint64_t* moved, bool* stopped) {
  const abi::ThreadSlot& s = slots_[st.slot];
  st.state = __atomic_load_n(&s.state, __ATOMIC_ACQUIRE);
  uint64_t head = __atomic_load_n(&s.head, __ATOMIC_ACQUIRE);
  st.written = __atomic_load_n(&s.written, __ATOMIC_RELAXED);
  st.dropped = __atomic_load_n(&s.dropped, __ATOMIC_RELAXED);
  if (head >= kMaxPosition) {
    ++st.corrupt_blocks;
    return Status::Ok();
  }
  const bool direct = consume_ && mode_ != abi::Mode::kOverwrite && direct_ok_;
  const uint8_t* ring = rings_ + uint64_t{st.slot} * ring_size_;
  const uint64_t mask = ring_size_ - 1;
  uint64_t buf_from = 0, buf_to = 0;  // buffered copy (not direct): positions it holds
  // Not direct: copy everything new in one go (fast, so a writer lapping the ring overruns
  // as little as possible), then keep what was still intact once the copy was done. If the
  // writer overran most of the copy (we were descheduled), copy again from its new head.
  for (int attempt = 0; !direct && st.copied < head; ++attempt) {
    uint64_t from = st.copied;
    uint64_t safe = oldest_safe_block(mode_, writer_gone_, head, s.consumed, block_, ring_size_);
    if (from < safe) from = safe < head ? safe : head;
    if (head - from > ring_size_) from = head - ring_size_;
    buf_.resize(head - from);
    uint64_t first = ring_size_ - (from & mask);
    uint64_t n1 = head - from < first ? head - from : first;
    std::memcpy(buf_.data(), ring + (from & mask), n1);
    if (n1 < head - from) std::memcpy(buf_.data() + n1, ring, head - from - n1);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint32_t gen = __atomic_load_n(&s.generation, __ATOMIC_ACQUIRE);
    uint64_t head2 = __atomic_load_n(&s.head, __ATOMIC_ACQUIRE);
    uint64_t consumed = __atomic_load_n(&s.consumed, __ATOMIC_ACQUIRE);
    if (gen != st.generation || head2 < head) return Status::Ok();  // slot reused
    safe = oldest_safe_block(mode_, writer_gone_, head2, consumed, block_, ring_size_);
    buf_from = from > safe ? from : (safe < head ? safe : head);
    buf_to = head;
    if (attempt < 4 && (head - buf_from) * 2 < head - from) {
      head = head2;  // most of the copy was overrun: try again
      continue;
    }
    st.copied = buf_from;
    break;
  }
  while (st.copied < head && !*stopped) {
    uint64_t from = st.copied;
    uint64_t to = head;
    if (to - from > file::kMaxDataChunkRaw) to = from + file::kMaxDataChunkRaw;
    if (to - from > ring_size_) to = from + ring_size_;
    const uint8_t* data;
    struct iovec pieces[2];
    int npieces = 0;
    uint64_t first = ring_size_ - (from & mask);  // bytes before the ring wraps
    if (direct) {
      uint64_t safe = oldest_safe_block(mode_, writer_gone_, head, s.consumed, block_, ring_size_);
      if (from < safe) {  // cannot happen while we are the consumer; be safe anyway
        st.copied = safe < head ? safe : head;
        continue;
      }
      if (to - from <= first) {
        data = ring + (from & mask);
      } else {
        // The range wraps: walk a linear copy, write from the mapping in two pieces.
        buf_.resize(to - from);
        std::memcpy(buf_.data(), ring + (from & mask), first);
        std::memcpy(buf_.data() + first, ring, to - from - first);
        data = buf_.data();
      }
    } else {
      if (to > buf_to) to = buf_to;
      data = buf_.data() + (from - (buf_to - buf_.size()));
    }
    uint64_t end = walk(st, data, from, to, hook, stopped);
    if (direct) {
      uint64_t n1 = end - from < first ? end - from : first;
      pieces[npieces++] = {const_cast<uint8_t*>(ring + (from & mask)), n1};
      if (n1 < end - from) pieces[npieces++] = {const_cast<uint8_t*>(ring), end - from - n1};
    } else {
      pieces[npieces++] = {const_cast<uint8_t*>(data), end - from};
    }
    if (end > from) {
      Status w =
          out_.write_chunk(file::ChunkType::kData, st.slot, st.generation, from, pieces, npieces);
      if (!w.ok()) return w;
    }
    *moved += end - from;
    st.copied = end;
    publish(st);
  }
  return Status::Ok();
}

Status Drainer::pass(const RecordHook& hook, uint64_t* moved, bool* stopped) {
  *moved = 0;
  *stopped = false;
  Status m = write_meta(false);
  if (!m.ok()) return m;
  struct PassCount {
    uint64_t* n;
    ~PassCount() { ++*n; }
  } count{&passes_};
  for (uint32_t i = 0; i < live_.size() && !*stopped; ++i) {
    const abi::ThreadSlot& s = slots_[i];
    uint32_t state = __atomic_load_n(&s.state, __ATOMIC_ACQUIRE);
    uint32_t gen = __atomic_load_n(&s.generation, __ATOMIC_ACQUIRE);
    StreamState& st = live_[i];
    if (st.active && (gen != st.generation || state == 0 || state > 2)) {
      // The slot was freed or reused: what the old generation left unread is gone.
      if (st.written > st.seq) st.reclaimed = st.written - st.seq;
      finished_.push_back(st);
      st = StreamState();
    }
    if (state == static_cast<uint32_t>(abi::SlotState::kFree) || state > 2) continue;
    if (!st.active) {
      // A slot being claimed right now has its generation bumped but not yet its other
      // fields (the name is cleared, then set): wait for the claim to finish.
      if (s.name[0] == '\0' && !writer_gone_ && ++claim_waits_[i] < 1000) continue;
      claim_waits_[i] = 0;
      Status s2 = start_stream(i, gen, passes_ == 0, &st);
      if (!s2.ok()) return s2;
    }
    uint64_t n = 0;
    Status d = drain(st, hook, &n, stopped);
    *moved += n;
    if (!d.ok()) return d;
  }
  return Status::Ok();
}

std::vector<StreamState> Drainer::all_streams() const {
  std::vector<StreamState> out = finished_;
  for (const StreamState& s : live_) {
    if (s.active) out.push_back(s);
  }
  return out;
}

uint64_t Drainer::records() const { return records_; }
uint64_t Drainer::lost_no_slot() const {
  return __atomic_load_n(&header_->lost_no_slot, __ATOMIC_RELAXED);
}
uint64_t Drainer::lost_reclaimed() const {
  return __atomic_load_n(&header_->lost_reclaimed, __ATOMIC_RELAXED);
}

Status Drainer::write_loss() {
  std::vector<StreamState> all = all_streams();
  std::vector<uint8_t> payload(sizeof(file::LossPayload) + all.size() * sizeof(file::LossEntry));
  file::LossPayload lp{};
  lp.lost_no_slot = lost_no_slot();
  lp.lost_reclaimed = lost_reclaimed();
  lp.count = static_cast<uint32_t>(all.size());
  std::memcpy(payload.data(), &lp, sizeof(lp));
  for (size_t i = 0; i < all.size(); ++i) {
    file::LossEntry e{};
    e.slot = all[i].slot;
    e.generation = all[i].generation;
    e.written = all[i].written;
    e.dropped = all[i].dropped;
    e.state = all[i].state;
    std::memcpy(payload.data() + sizeof(lp) + i * sizeof(e), &e, sizeof(e));
  }
  if (payload.size() > file::kMaxChunkBytes) payload.resize(sizeof(lp));
  return out_.write_chunk(file::ChunkType::kLoss, payload.data(),
                          static_cast<uint32_t>(payload.size()));
}

Status Drainer::write_end(file::EndReason reason) {
  file::EndPayload e{};
  e.chunks = out_.chunks();
  e.data_bytes = out_.data_bytes();
  e.records = records_;
  e.reason = static_cast<uint32_t>(reason);
  return out_.write_chunk(file::ChunkType::kEnd, &e, sizeof(e));
}

}  // namespace nanotrace::rec
