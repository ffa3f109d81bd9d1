// The drainer: copies ring bytes into DATA chunks and accounts for their records (see
// drainer.hpp; the accounting is in drainer_records.cc, META chunks in drainer_meta.cc).
//
// Safety of a copy. With a consumer attached and the target in block or discard mode, the
// writer never writes below the consumer's block, so [consumed block, head) is stable: it is
// read and written to the file in place. Otherwise (overwrite mode, or a snapshot that does
// not consume) the bytes are copied to a buffer in one go, then validated like the live
// reader does: the slot generation must be unchanged and the copied blocks must lie at or
// after the oldest block the writer cannot be overwriting; the rest is cut off, and the
// records it held show up as a sequence gap (counted as overwritten) when read back.
//
// Chunk size. In block mode a writer that has caught up waits for the consumer's position,
// which moves once a chunk is in the file. A chunk as big as the ring would make writer and
// recorder take turns; a quarter of the ring lets the writer fill one part while the
// recorder writes another, and is still big enough (256 KiB for the default 1 MiB ring) for
// the per-chunk costs not to matter.
#include "record/drainer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/process.hpp"
#include "base/read_at.hpp"
#include "reader/thread_stream.hpp"
#include "reader/trace_internals.hpp"

namespace nanotrace::rec {
namespace {

constexpr uint64_t kMaxPosition = uint64_t{1} << 62;

}  // namespace

using reader::oldest_safe_block;

std::vector<SlotAtAttach> slots_at_attach(const Trace& trace) {
  auto* h = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(trace));
  auto* slots = reinterpret_cast<const abi::ThreadSlot*>(reader::TraceInternals::base(trace) +
                                                         h->threads_offset);
  std::vector<SlotAtAttach> out(trace.process().max_threads);
  for (uint32_t i = 0; i < out.size(); ++i) {
    out[i].generation = __atomic_load_n(&slots[i].generation, __ATOMIC_ACQUIRE);
    out[i].state = __atomic_load_n(&slots[i].state, __ATOMIC_ACQUIRE);
    out[i].dropped = __atomic_load_n(&slots[i].dropped, __ATOMIC_ACQUIRE);
  }
  return out;
}

Drainer::Drainer(Trace& trace, FileWriter& out, bool consume, std::vector<SlotAtAttach> at_attach)
    : trace_(trace),
      out_(out),
      consume_(consume && reader::TraceInternals::writable_base(trace) != nullptr),
      at_attach_(std::move(at_attach)) {
  header_ = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(trace));
  const ProcessInfo& p = trace.process();
  slots_ = reinterpret_cast<abi::ThreadSlot*>(
      const_cast<uint8_t*>(reader::TraceInternals::base(trace)) + header_->threads_offset);
  rings_ = reader::TraceInternals::base(trace) + header_->rings_offset;
  ring_size_ = p.ring_size;
  block_ = p.block_size;
  chunk_ = ring_size_ / 4;
  if (chunk_ > file::kMaxDataChunkRaw) chunk_ = file::kMaxDataChunkRaw;
  if (chunk_ < block_) chunk_ = block_;
  mode_ = p.mode;
  writer_gone_ = !p.alive;
  live_.resize(p.max_threads);
  claim_waits_.resize(p.max_threads);
  build_sizes();
  // How stable ring bytes reach the file: scripts/record-bench.sh measures each against the
  // default in the same run (docs/format.md, "How the recorder copies").
  const char* env = std::getenv("NANOTRACE_RECORD_COPY");
  std::string how = env != nullptr ? env : "";
  if (how == "buffered") {
    copy_path_ = CopyPath::kBuffered;
  } else if ((how == "copy_file_range" || how == "splice") && consume_) {
    // The descriptor must name the object we mapped: a reused pid could have put another
    // segment at the path since.
    int fd = ::open(p.path.c_str(), O_RDONLY | O_CLOEXEC);
    abi::SegmentHeader h{};
    bool same = fd >= 0 && ::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
                std::memcmp(h.magic, header_->magic, sizeof(h.magic)) == 0 &&
                h.pid == header_->pid && h.proc_start_time == header_->proc_start_time &&
                h.segment_size == header_->segment_size;
    if (same && out_.set_copy_source(fd, how == "splice").ok()) {
      segment_fd_ = fd;
      copy_path_ = how == "splice" ? CopyPath::kSplice : CopyPath::kCopyFileRange;
    } else {
      if (fd >= 0) ::close(fd);
      std::fprintf(stderr, "nanotrace: NANOTRACE_RECORD_COPY=%s unavailable, using writev\n",
                   how.c_str());
    }
  } else if (!how.empty() && how != "writev") {
    std::fprintf(stderr, "nanotrace: unknown NANOTRACE_RECORD_COPY=%s, using writev\n",
                 how.c_str());
  }
}

Drainer::~Drainer() {
  if (segment_fd_ >= 0) {
    (void)out_.set_copy_source(-1, false);
    ::close(segment_fd_);
  }
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
  // An earlier consumer's counts are about this thread only if they name its generation.
  const bool counts_are_this_threads =
      __atomic_load_n(&s.consumed_generation, __ATOMIC_ACQUIRE) == generation;
  uint64_t consumed = counts_are_this_threads ? __atomic_load_n(&s.consumed, __ATOMIC_ACQUIRE) : 0;
  // A generation that began since we attached has all its drops in this recording (its
  // counter starts at 0 when the slot is claimed), even those before a pass first saw it.
  // The first pass runs after attaching, so whether a generation existed before comes from
  // the slots as they were then, when known.
  if (!at_attach_.empty()) {
    const SlotAtAttach& a = at_attach_[slot];
    initial = a.generation == generation && a.state != static_cast<uint32_t>(abi::SlotState::kFree);
  }
  // Of a thread that was running, the drops an earlier consumer reported are not ours; every
  // other drop happened after the records still in the ring, which this file starts with.
  st->dropped_at_start = consume_ && initial && counts_are_this_threads
                             ? __atomic_load_n(&s.consumed_dropped, __ATOMIC_ACQUIRE)
                             : 0;
  // A consumer's position also bounds a snapshot in block and discard modes: what lies before
  // it was taken by that consumer, not lost.
  // Only a generation that existed before we started can have been partly consumed by
  // someone else; a later one starts at 0 (its consumed field may still be the previous
  // generation's while the claim is in progress).
  if (initial && counts_are_this_threads && (consume_ || mode_ != abi::Mode::kOverwrite) &&
      consumed <= head && head < kMaxPosition) {
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
  if (direct()) {
    // Map the ring's pages now: writing from a mapping that page-faults every 4 KiB is slower
    // than a writer at full speed. (Copies go through pread and need no mapping.)
    uintptr_t ring = reinterpret_cast<uintptr_t>(rings_ + uint64_t{slot} * ring_size_);
    uintptr_t page = ring & ~uintptr_t{4095};
#ifdef MADV_POPULATE_READ
    (void)madvise(reinterpret_cast<void*>(page), ring + ring_size_ - page, MADV_POPULATE_READ);
#endif
  }
  file::ThreadPayload t{};
  t.slot = slot | process_tag_;
  t.generation = generation;
  t.tid = st->tid;
  t.state = st->state;
  t.start_ticks = s.start_ticks;
  t.first_pos = st->first_pos;
  t.first_seq = st->seq;
  t.dropped_at_start = st->dropped_at_start;
  std::memcpy(t.name, s.name, sizeof(t.name));
  struct iovec v = {&t, sizeof(t)};
  return out_.write_chunk(file::ChunkType::kThread, slot | process_tag_, generation, 0, &v, 1);
}

void Drainer::publish(StreamState& st) {
  if (!consume_) return;
  abi::ThreadSlot* s = &slots_[st.slot];
  if (__atomic_load_n(&s->generation, __ATOMIC_ACQUIRE) != st.generation) return;
  uint64_t pos = st.walk_pos < st.copied ? st.walk_pos : st.copied;
  // A thread that has exited and whose every byte we took is done: a new thread may take its
  // slot (a block-mode writer may be waiting for one).
  bool drained_exit = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) ==
                          static_cast<uint32_t>(abi::SlotState::kExited) &&
                      pos >= __atomic_load_n(&s->head, __ATOMIC_ACQUIRE);
  // The drops this file reports (the LOSS chunk carries st.dropped) are not a later
  // consumer's to report again.
  __atomic_store_n(&s->consumed_dropped, st.dropped, __ATOMIC_RELEASE);
  __atomic_store_n(&s->consumed_records, st.seq, __ATOMIC_RELEASE);
  __atomic_store_n(&s->consumed, pos, __ATOMIC_RELEASE);
  // Last: the slot may have been claimed again since the check above, and the counts then
  // describe the previous thread, which this says.
  __atomic_store_n(&s->consumed_generation, st.generation, __ATOMIC_RELEASE);
  __atomic_fetch_add(&s->consumer_seq, 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&s->writer_waiting, __ATOMIC_SEQ_CST) != 0) {
    sys::futex_wake_all(&s->consumer_seq);
  }
  if (drained_exit) {
    // A writer of the process may be waiting for a slot (block mode): one is free now.
    auto* h = const_cast<abi::SegmentHeader*>(header_);
    __atomic_fetch_add(&h->slot_epoch, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&h->slot_waiters, __ATOMIC_SEQ_CST) != 0)
      sys::futex_wake_all(&h->slot_epoch);
  }
}

void Drainer::copy_out(uint8_t* dst, uint64_t offset, uint64_t n) const {
  // pread copies through the kernel's mapping of the segment: a snapshot or recover process
  // would otherwise fault in every page of its fresh mapping, which costs more than the copy.
  uint64_t done = sys::read_at(reader::TraceInternals::fd(trace_), dst, n, offset);
  // A segment truncated under us: the missing bytes read as zeros, which no block header
  // validates, so they count as corrupt blocks.
  if (done < n) std::memset(dst + done, 0, n - done);
}

// Not direct: copies everything new in one go (fast, so a writer lapping the ring overruns as
// little as possible), then keeps what was still intact once the copy was done. If the writer
// overran most of the copy (we were descheduled), copies again from its new head (*head).
bool Drainer::copy_new_bytes(StreamState& st, const abi::ThreadSlot& s, uint64_t* head,
                             RingView* view) {
  const uint64_t mask = ring_size_ - 1;
  for (int attempt = 0;; ++attempt) {
    uint64_t from = st.copied;
    uint64_t safe = oldest_safe_block(mode_, writer_gone_, *head, s.consumed, block_, ring_size_);
    if (from < safe) from = safe < *head ? safe : *head;
    if (*head - from > ring_size_) from = *head - ring_size_;
    buf_.resize(*head - from);
    uint64_t first = ring_size_ - (from & mask);
    uint64_t n1 = *head - from < first ? *head - from : first;
    const uint64_t ring_off = header_->rings_offset + uint64_t{st.slot} * ring_size_;
    copy_out(buf_.data(), ring_off + (from & mask), n1);
    if (n1 < *head - from) copy_out(buf_.data() + n1, ring_off, *head - from - n1);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint32_t gen = __atomic_load_n(&s.generation, __ATOMIC_ACQUIRE);
    uint64_t head2 = __atomic_load_n(&s.head, __ATOMIC_ACQUIRE);
    uint64_t consumed = __atomic_load_n(&s.consumed, __ATOMIC_ACQUIRE);
    if (gen != st.generation || head2 < *head) return false;  // slot reused
    safe = oldest_safe_block(mode_, writer_gone_, head2, consumed, block_, ring_size_);
    uint64_t keep = from > safe ? from : (safe < *head ? safe : *head);
    *view = RingView{buf_.data(), from, ~uint64_t{0}, keep, *head};
    if (attempt < 4 && (*head - keep) * 2 < *head - from) {
      *head = head2;  // most of the copy was overrun: try again
      continue;
    }
    st.copied = keep;
    return true;
  }
}

// Accounts for and writes [st.copied, head) of view as DATA chunks, each ending on a block
// boundary (or at the head), so that a record never straddles two.
Status Drainer::write_chunks(StreamState& st, const RingView& view, uint64_t head,
                             const RecordHook& hook, bool tail, uint64_t* moved, bool* stopped) {
  const bool direct = this->direct();
  const uint8_t* ring = rings_ + uint64_t{st.slot} * ring_size_;
  const uint64_t mask = ring_size_ - 1;
  uint64_t moved_here = 0;
  do {
    uint64_t from = st.copied;
    uint64_t to = (from + chunk_) & ~(block_ - 1);
    if (to > head) to = head;
    uint64_t end = account(st, view, to, hook, tail, stopped);
    if (end > from) {
      // From the ring, the range may wrap (at a block boundary): two pieces.
      const uint64_t ring_off = header_->rings_offset + uint64_t{st.slot} * ring_size_;
      uint64_t n1 = end - from;
      if (direct && (from & mask) + n1 > ring_size_) n1 = ring_size_ - (from & mask);
      struct iovec pieces[2] = {{const_cast<uint8_t*>(view.at(from)), n1},
                                {const_cast<uint8_t*>(ring), end - from - n1}};
      uint64_t offsets[2] = {ring_off + (from & mask), ring_off};
      int n = n1 < end - from ? 2 : 1;
      Status w = out_.write_chunk(file::ChunkType::kData, st.slot | process_tag_, st.generation,
                                  from, pieces, n, direct ? offsets : nullptr);
      if (!w.ok()) return w;
    }
    moved_here += end - from;
    st.copied = end;
    publish(st);
  } while (st.copied < head && !*stopped);
  *moved += moved_here;
  if (moved_here > max_stream_moved_) max_stream_moved_ = moved_here;
  return Status::Ok();
}

Status Drainer::drain(StreamState& st, const RecordHook& hook, bool final, uint64_t* moved,
                      bool* stopped) {
  const abi::ThreadSlot& s = slots_[st.slot];
  // State, head, then the counters: the records up to head are then counted in `written`,
  // but for the one the writer may be between publishing and counting.
  st.state = __atomic_load_n(&s.state, __ATOMIC_ACQUIRE);
  uint64_t head = __atomic_load_n(&s.head, __ATOMIC_ACQUIRE);
  st.written = __atomic_load_n(&s.written, __ATOMIC_ACQUIRE);
  st.dropped = __atomic_load_n(&s.dropped, __ATOMIC_ACQUIRE);
  if (head >= kMaxPosition) {
    ++st.corrupt_blocks;
    return Status::Ok();
  }
  // The slot was reused since pass() looked (the next pass starts the new stream), or a
  // damaged head: a head never moves back within a generation.
  if (head < st.copied) return Status::Ok();
  // A record of an event registered since the last META chunk may be in what we copy now:
  // describe the event first, so that every prefix of the file can decode its records.
  if (__atomic_load_n(&header_->events_count, __ATOMIC_ACQUIRE) != meta_events_) {
    Status m = write_meta(false);
    if (!m.ok()) return m;
  }
  const bool direct = this->direct();
  // The last block is accounted for record by record only when its count is needed now;
  // a thread that exited (state read before head) will not add to it. A copy does not keep
  // the bytes before it, so there the last block is always walked.
  const bool tail = final || writer_gone_ || !direct ||
                    st.state != static_cast<uint32_t>(abi::SlotState::kActive);
  // Nothing new to copy and nothing left to account for.
  if (st.copied >= head && (st.walk_pos >= head || !tail || !direct)) return Status::Ok();
  const uint8_t* ring = rings_ + uint64_t{st.slot} * ring_size_;
  const uint64_t mask = ring_size_ - 1;
  RingView view{ring, 0, mask, 0, head};
  if (!direct && st.copied < head && !copy_new_bytes(st, s, &head, &view)) {
    return Status::Ok();  // the slot was reused
  }
  if (direct) {
    uint64_t safe = oldest_safe_block(mode_, writer_gone_, head, s.consumed, block_, ring_size_);
    view.from = safe < head ? safe : head;
    if (st.copied < view.from) st.copied = view.from;  // cannot happen while we consume
  }
  return write_chunks(st, view, head, hook, tail, moved, stopped);
}

Status Drainer::pass(const RecordHook& hook, bool final, uint64_t* moved, bool* stopped) {
  *moved = 0;
  *stopped = false;
  max_stream_moved_ = 0;
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
    Status d = drain(st, hook, final, &n, stopped);
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
bool Drainer::writer_waiting() const {
  if (__atomic_load_n(&header_->slot_waiters, __ATOMIC_RELAXED) != 0) return true;
  for (const StreamState& s : live_) {
    if (s.active && __atomic_load_n(&slots_[s.slot].writer_waiting, __ATOMIC_RELAXED) != 0) {
      return true;
    }
  }
  return false;
}
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
    e.slot = all[i].slot | process_tag_;
    e.generation = all[i].generation;
    e.written = all[i].written;
    e.dropped = all[i].dropped;
    e.state = all[i].state;
    std::memcpy(payload.data() + sizeof(lp) + i * sizeof(e), &e, sizeof(e));
  }
  if (payload.size() > file::kMaxChunkBytes) payload.resize(sizeof(lp));
  struct iovec v = {payload.data(), payload.size()};
  return out_.write_chunk(file::ChunkType::kLoss, process_tag_, 0, 0, &v, 1);
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
