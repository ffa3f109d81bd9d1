// One thread generation of a trace file read back: the DATA extents are concatenated in
// position order into the thread's byte stream, which is parsed block by block exactly like
// a live ring (block header position and sequence checks, then walk_block).
// Memory: one decoded chunk per stream, plus one block for a block split between chunks, plus
// the next chunk where the read's prefetcher (extent_prefetch.hpp) reads ahead for it.
#include <cstring>

#include "reader/extent_prefetch.hpp"
#include "reader/thread_stream.hpp"
#include "reader/trace_file.hpp"
#include "reader/trace_internals.hpp"

namespace nanotrace::reader {

FileThreadStream::FileThreadStream(const Trace& trace, std::shared_ptr<const TraceFile> file,
                                   uint32_t index, const ThreadInfo& info,
                                   std::shared_ptr<ExtentPrefetcher> prefetcher)
    : trace_(trace),
      id_map_(TraceInternals::id_map(trace, info.process)),
      alignment_(TraceInternals::clock_alignment(trace, info.process)),
      sizer_(TraceInternals::local_events(trace, info.process)),
      file_(std::move(file)),
      stream_(file_->streams[index]),
      index_(index) {
  const std::vector<ProcessInfo>& processes = trace.processes();
  block_size_ = info.process < processes.size() ? processes[info.process].block_size
                                                : trace.process().block_size;
  records_.pid = info.pid;
  stats_.info = info;
  stats_.dropped = stats_.info.dropped;
  expected_seq_ = stream_.thread.first_seq;
  if (!stream_.extents.empty()) {
    cursor_ = stream_.extents[0].position;
    auto slot = std::make_unique<ExtentSlot>();
    if (slot->try_join(std::move(prefetcher))) {
      ahead_ = std::move(slot);
      ahead_->load(*file_, stream_.extents[0]);
    }
  }
}

FileThreadStream::~FileThreadStream() = default;

bool FileThreadStream::ensure_data() {
  if (have_chunk_ && cursor_ < chunk_pos_ + chunk_.size()) return true;
  if (next_extent_ >= stream_.extents.size()) return false;
  const Extent& e = stream_.extents[next_extent_++];
  Status s = ahead_ != nullptr && ahead_->holds(e.offset)
                 ? ahead_->take(&chunk_)
                 : file_->read_extent(e, &chunk_, &scratch_);
  if (!s.ok()) {
    ++stats_.corrupt_blocks;
    next_extent_ = stream_.extents.size();
    have_chunk_ = false;
    return false;
  }
  if (ahead_ != nullptr && next_extent_ < stream_.extents.size()) {
    ahead_->load(*file_, stream_.extents[next_extent_]);  // read while this one is decoded
  }
  have_chunk_ = true;
  chunk_pos_ = e.position;
  if (cursor_ < chunk_pos_) cursor_ = chunk_pos_;  // a gap: records were not copied
  return true;
}

uint64_t FileThreadStream::read_bytes(uint8_t* dst, uint64_t n) {
  uint64_t done = 0;
  while (done < n) {
    if (!have_chunk_ || cursor_ >= chunk_pos_ + chunk_.size()) {
      // Continue into the next extent only if it follows without a gap.
      if (next_extent_ >= stream_.extents.size() ||
          stream_.extents[next_extent_].position != cursor_) {
        break;
      }
      if (!ensure_data()) break;
    }
    uint64_t avail = chunk_pos_ + chunk_.size() - cursor_;
    uint64_t take = n - done < avail ? n - done : avail;
    if (dst) std::memcpy(dst + done, chunk_.data() + (cursor_ - chunk_pos_), take);
    cursor_ += take;
    done += take;
  }
  return done;
}

bool FileThreadStream::load_block() {
  while (ensure_data()) {
    uint64_t misalign = cursor_ & (block_size_ - 1);
    if (misalign != 0) {  // only whole blocks can be parsed: skip to the next one
      read_bytes(nullptr, block_size_ - misalign);
      continue;
    }
    uint64_t start = cursor_;
    const uint8_t* data;
    uint64_t len;
    uint64_t in_chunk = chunk_pos_ + chunk_.size() - cursor_;
    if (in_chunk >= block_size_ || next_extent_ >= stream_.extents.size() ||
        stream_.extents[next_extent_].position != chunk_pos_ + chunk_.size()) {
      // The block is whole in this chunk (or ends with it): parsed where it lies.
      data = chunk_.data() + (cursor_ - chunk_pos_);
      len = read_bytes(nullptr, block_size_);
    } else {
      // The block continues in the next chunk: copied whole.
      if (buf_.size() < block_size_) buf_.resize(block_size_);
      data = buf_.data();
      len = read_bytes(buf_.data(), block_size_);
    }
    if (len < abi::kBlockHeaderBytes) continue;  // the end of a stream cut short
    // A block from before the recording began is one the stream resumes inside.
    if (block_.open(data, len, start, start < stream_.thread.first_pos,
                    expected_seq_ + (1ull << 40), &expected_seq_, &stats_)) {
      return true;
    }
  }
  return false;
}

void FileThreadStream::map_event_ids(const RecordSpan& span) {
  // The span lies in this stream's own buffers (chunk_ or buf_), each record handed out once.
  auto* data = const_cast<uint8_t*>(span.data);
  for (uint32_t off = 0; off < span.bytes;) {
    const uint32_t size = sizer_.size(data, off, span.bytes);
    if (size == 0) break;  // cannot happen: the walk checked every record
    uint16_t id;
    std::memcpy(&id, data + off, 2);
    id = id < id_map_.size() ? id_map_[id] : 0;
    std::memcpy(data + off, &id, 2);
    off += size;
  }
}

void FileThreadStream::map_ticks(RecordSpan* span) {
  // In place, as map_event_ids: each stamp is expanded against the block's clock value, mapped
  // onto the trace's clock and stored relative to the mapped block value (the map keeps
  // order and, its rate near 1, keeps every delta within 48 bits).
  auto* data = const_cast<uint8_t*>(span->data);
  const uint64_t base = file::align_ticks(*alignment_, span->base_ticks);
  for (uint32_t off = 0; off < span->bytes;) {
    const uint32_t size = sizer_.size(data, off, span->bytes);
    if (size == 0) break;  // cannot happen: the walk checked every record
    uint64_t word0;
    std::memcpy(&word0, data + off, 8);
    const uint64_t ticks =
        file::align_ticks(*alignment_, abi::expand_ticks(span->base_ticks, word0 >> 16));
    word0 = (ticks & abi::kTsc48Mask) << 16 | (word0 & 0xffff);
    std::memcpy(data + off, &word0, 8);
    off += size;
  }
  span->base_ticks = base;
}

bool FileThreadStream::next(Record* r) { return next_decoded(*this, records_, trace_, index_, r); }

bool FileThreadStream::next_span(RecordSpan* span) {
  while (!done_) {
    if (!block_.is_open() && !load_block()) break;
    // Records before first_pos were taken before the recording began.
    block_.walk(sizer_, stream_.thread.first_pos, span, &stats_);
    if (span->records > 0) {
      if (!id_map_.empty()) map_event_ids(*span);
      if (alignment_ != nullptr) map_ticks(span);
      expected_seq_ = block_.next_seq();
      stats_.records += span->records;
      return true;
    }
  }
  end();
  return false;
}

bool FileThreadStream::next_unchecked(RecordSpan* span) {
  while (!done_) {
    if (!block_.is_open() && !load_block()) break;
    if (block_.starts_before(stream_.thread.first_pos)) {
      // Some of its records were taken before the recording began: the walk skips them.
      block_.walk(sizer_, stream_.thread.first_pos, span, &stats_);
      if (span->records > 0) {
        expected_seq_ = block_.next_seq();
        stats_.records += span->records;
        unchecked_walked_ = true;
        return true;
      }
      continue;
    }
    block_.hand_out(span);
    unchecked_first_seq_ = span->first_seq;
    unchecked_walked_ = false;
    return true;
  }
  end();
  return false;
}

void FileThreadStream::finish_unchecked(uint32_t records, bool corrupt) {
  if (unchecked_walked_) return;  // counted by the walk
  if (corrupt) ++stats_.corrupt_blocks;
  if (records > 0) {
    expected_seq_ = unchecked_first_seq_ + records;
    stats_.records += records;
  }
}

void FileThreadStream::end() {
  // A stream cut short by a corrupt chunk: what the writer published after it is lost.
  if (!done_ && stats_.corrupt_blocks > 0 && stream_.has_loss &&
      stream_.loss.written > expected_seq_) {
    stats_.unreadable = stream_.loss.written - expected_seq_;
  }
  done_ = true;
  ahead_.reset();    // gives its share of the read-ahead budget back
  chunk_.release();  // streams end one by one: free memory as they do
  scratch_.release();
  std::vector<uint8_t>().swap(buf_);
}

}  // namespace nanotrace::reader
