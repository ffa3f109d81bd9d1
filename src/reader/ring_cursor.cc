// Reading one thread's live ring: copy a block, validate it, decode its records (see
// thread_stream.hpp for the validation rule).
//
// Blocks are copied with pread(2) on the segment file rather than from this process's
// mapping: the kernel copies through its own long-lived mapping, while the first touch of
// each page of a fresh mapping costs a fault. Reading a dead process's rings this way, a few
// blocks at a time into a buffer that stays in cache, halved the time of a CTF export
// (scripts/export-bench.sh; under shadow paging a first touch costs ~1.8 us per 4 KiB page).
#include <algorithm>
#include <cstring>

#include "base/process.hpp"
#include "base/read_at.hpp"
#include "reader/thread_stream.hpp"
#include "reader/trace_internals.hpp"

namespace nanotrace::reader {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// Positions are byte counts of one thread; anything near 2^64 is a corrupt slot.
constexpr uint64_t kMaxPosition = uint64_t{1} << 62;

}  // namespace

// The oldest block position the writer cannot be overwriting. In overwrite mode, having
// published `head`, it may still write the current block and (on a block switch) the next
// one, one ring ahead. In the other modes it never starts a block before the consumer has
// released the whole block one ring earlier, so everything from the consumer's block on is
// safe.
// With no writer left (the process is gone), only the block the last lap was cutting into
// is lost.
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

LiveThreadStream::LiveThreadStream(Trace& trace, const ThreadInfo& info, bool consume,
                                   uint32_t index, uint32_t chunk_bytes)
    : trace_(trace), sizer_(trace), index_(index), chunk_bytes_(chunk_bytes) {
  attach(info);
  auto* h = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(trace));
  writable_slot_ = consume && reader::TraceInternals::writable_base(trace)
                       ? reinterpret_cast<abi::ThreadSlot*>(
                             reader::TraceInternals::writable_base(trace) + h->threads_offset) +
                             info.slot
                       : nullptr;
  // An earlier consumer's counts are about this thread only if they name its generation.
  const bool counts_are_this_threads =
      __atomic_load_n(&slot_->consumed_generation, __ATOMIC_ACQUIRE) == info.generation;
  if (counts_are_this_threads) {
    // Every reader starts where the consumer is: what it took is in its recording, not lost
    // (a reader that does not consume would otherwise count it as overwritten).
    pos_ = __atomic_load_n(&slot_->consumed, __ATOMIC_ACQUIRE);
    expected_seq_ = __atomic_load_n(&slot_->consumed_records, __ATOMIC_ACQUIRE);
    // Drops the consumer reported are not ours to report again.
    uint64_t reported = __atomic_load_n(&slot_->consumed_dropped, __ATOMIC_ACQUIRE);
    stats_.dropped = info.dropped > reported ? info.dropped - reported : 0;
  } else {
    pos_ = 0;
    expected_seq_ = 0;
    stats_.dropped = info.dropped;
  }
  start_at_safe_block(counts_are_this_threads ? __atomic_load_n(&slot_->consumed, __ATOMIC_ACQUIRE)
                                              : 0);
}

LiveThreadStream::LiveThreadStream(Trace& trace, const ThreadInfo& info, const RingPosition& from,
                                   uint32_t index, uint32_t chunk_bytes, ByteArena* keep)
    : trace_(trace), sizer_(trace), index_(index), chunk_bytes_(chunk_bytes), keep_(keep) {
  attach(info);
  writable_slot_ = nullptr;
  pos_ = from.position;
  expected_seq_ = from.seq;
  stats_.dropped = info.dropped;
  // A consumer's position bounds what the writer may reuse (modes other than overwrite).
  const bool counts_are_this_threads =
      __atomic_load_n(&slot_->consumed_generation, __ATOMIC_ACQUIRE) == info.generation;
  start_at_safe_block(counts_are_this_threads ? __atomic_load_n(&slot_->consumed, __ATOMIC_ACQUIRE)
                                              : 0);
}

void LiveThreadStream::attach(const ThreadInfo& info) {
  auto* h = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(trace_));
  const ProcessInfo& p = trace_.process();
  records_.pid = p.pid;
  slot_ = reinterpret_cast<const abi::ThreadSlot*>(reader::TraceInternals::base(trace_) +
                                                   h->threads_offset) +
          info.slot;
  ring_offset_ = h->rings_offset + uint64_t{info.slot} * p.ring_size;
  ring_size_ = p.ring_size;
  mask_ = ring_size_ - 1;
  block_size_ = p.block_size;
  stats_.info = info;
  end_ = info.head;
  mode_ = p.mode;
  writer_gone_ = !p.alive;
}

void LiveThreadStream::start_at_safe_block(uint64_t consumed) {
  if (end_ >= kMaxPosition || consumed >= kMaxPosition) {
    ++stats_.corrupt_blocks;
    done_ = true;
    pos_ = end_ = 0;
    return;
  }
  uint64_t safe = oldest_safe_block(mode_, writer_gone_, end_, consumed, block_size_, ring_size_);
  if (pos_ < safe || pos_ > end_) pos_ = safe;
}

const uint8_t* LiveThreadStream::copy_block(uint64_t start, uint32_t len) {
  if (start >= copied_pos_ && start + len <= copied_pos_ + copied_len_) {
    return copied() + (start - copied_pos_);
  }
  // With the writer gone nothing moves, so several blocks are copied at once (up to the end
  // of the ring or of what was written).
  uint64_t offset = start & mask_;
  uint64_t want = writer_gone_ ? std::min({chunk_bytes_, ring_size_ - offset, end_ - start}) : len;
  if (want < len) want = len;
  uint8_t* to;
  if (keep_) {
    copied_at_ = keep_->size();
    to = keep_->append(want);
  } else {
    if (buf_.size() < want) buf_.resize(want);
    to = buf_.data();
  }
  uint64_t got = sys::read_at(reader::TraceInternals::fd(trace_), to, want, ring_offset_ + offset);
  if (keep_) keep_->shrink_by(want - got);
  if (got < len) {  // the segment file was truncated under us
    ++stats_.corrupt_blocks;
    done_ = true;
    copied_len_ = 0;
    return nullptr;
  }
  copied_pos_ = start;
  copied_len_ = got;
  return to;
}

bool LiveThreadStream::load_block() {
  while (pos_ < end_) {
    uint64_t start = pos_ & ~(block_size_ - 1);
    uint64_t stop = start + block_size_ < end_ ? start + block_size_ : end_;
    auto len = static_cast<uint32_t>(stop - start);
    // The private copy is validated against the writer's position read after it.
    const uint8_t* data = copy_block(start, len);
    if (data == nullptr) return false;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint32_t gen = __atomic_load_n(&slot_->generation, __ATOMIC_ACQUIRE);
    uint64_t head = __atomic_load_n(&slot_->head, __ATOMIC_ACQUIRE);
    uint64_t consumed = __atomic_load_n(&slot_->consumed, __ATOMIC_ACQUIRE);
    if (gen != stats_.info.generation || head < end_) {
      // The slot was reused by another thread: what this thread left is gone.
      done_ = true;
      return false;
    }
    if (head >= kMaxPosition || consumed >= kMaxPosition) {
      ++stats_.corrupt_blocks;
      done_ = true;
      return false;
    }
    uint64_t safe = oldest_safe_block(mode_, writer_gone_, head, consumed, block_size_, ring_size_);
    if (safe > end_) safe = end_;
    if (start < safe) {
      pos_ = safe;  // overwritten while we were behind; the seq gap counts the loss
      continue;
    }
    // A consumer may be continuing inside a block it began.
    if (block_.open(data, len, start, pos_ != start, stats_.info.written + (1ull << 40),
                    &expected_seq_, &stats_)) {
      return true;
    }
    pos_ = start + block_size_;
  }
  return false;
}

bool LiveThreadStream::next(Record* r) { return next_decoded(*this, records_, trace_, index_, r); }

bool LiveThreadStream::next_span(RecordSpan* span) {
  while (!done_) {
    if (!block_.is_open() && !load_block()) break;
    // Records before pos_ were returned by an earlier pass (a consumer resuming).
    block_.walk(sizer_, pos_, span, &stats_);
    if (span->records > 0) {
      expected_seq_ = block_.next_seq();
      stats_.records += span->records;
    }
    pos_ = block_.position() + block_size_;  // end of block (or of what was written)
    if (pos_ > end_) pos_ = end_;
    publish_consumed();
    if (span->records > 0) return true;
  }
  publish_consumed();
  std::vector<uint8_t>().swap(buf_);  // streams end one by one: free memory as they do
  copied_len_ = 0;
  return false;
}

void LiveThreadStream::publish_consumed() {
  if (!writable_slot_) return;
  __atomic_store_n(&writable_slot_->consumed_records, expected_seq_, __ATOMIC_RELEASE);
  __atomic_store_n(&writable_slot_->consumed_dropped, stats_.info.dropped, __ATOMIC_RELEASE);
  __atomic_store_n(&writable_slot_->consumed, pos_, __ATOMIC_RELEASE);
  // Last: the counts describe this generation, even if the slot was claimed again meanwhile.
  __atomic_store_n(&writable_slot_->consumed_generation, stats_.info.generation, __ATOMIC_RELEASE);
  __atomic_fetch_add(&writable_slot_->consumer_seq, 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&writable_slot_->writer_waiting, __ATOMIC_SEQ_CST) != 0) {
    sys::futex_wake_all(&writable_slot_->consumer_seq);
  }
}

}  // namespace nanotrace::reader
