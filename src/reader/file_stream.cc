// One thread generation of a trace file read back: the DATA extents are concatenated in
// position order into the thread's byte stream, which is parsed block by block exactly like
// a live ring (block header position and sequence checks, then walk_block).
// Memory: one decoded chunk per stream, plus one block for a block split between chunks.
#include <cstring>

#include "reader/thread_stream.hpp"
#include "reader/trace_file.hpp"

namespace nanotrace::reader {

FileThreadStream::FileThreadStream(const Trace& trace, std::shared_ptr<const TraceFile> file,
                                   uint32_t index, const ThreadInfo& info)
    : trace_(trace),
      sizer_(trace),
      file_(std::move(file)),
      stream_(file_->streams[index]),
      index_(index) {
  block_ = trace.process().block_size;
  stats_.info = info;
  stats_.dropped = stats_.info.dropped;
  expected_seq_ = stream_.thread.first_seq;
  if (!stream_.extents.empty()) cursor_ = stream_.extents[0].position;
}

bool FileThreadStream::ensure_data() {
  if (have_chunk_ && cursor_ < chunk_pos_ + chunk_.size()) return true;
  if (next_extent_ >= stream_.extents.size()) return false;
  const Extent& e = stream_.extents[next_extent_++];
  Status s = file_->read_extent(e, &chunk_, &scratch_);
  if (!s.ok()) {
    ++stats_.corrupt_blocks;
    next_extent_ = stream_.extents.size();
    have_chunk_ = false;
    return false;
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
  have_block_ = false;
  const uint64_t first_pos = stream_.thread.first_pos;
  while (ensure_data()) {
    uint64_t misalign = cursor_ & (block_ - 1);
    if (misalign != 0) {  // only whole blocks can be parsed: skip to the next one
      read_bytes(nullptr, block_ - misalign);
      continue;
    }
    uint64_t start = cursor_;
    uint64_t len;
    uint64_t in_chunk = chunk_pos_ + chunk_.size() - cursor_;
    if (in_chunk >= block_ || next_extent_ >= stream_.extents.size() ||
        stream_.extents[next_extent_].position != chunk_pos_ + chunk_.size()) {
      // The block is whole in this chunk (or ends with it): parsed where it lies.
      data_ = chunk_.data() + (cursor_ - chunk_pos_);
      len = read_bytes(nullptr, block_);
    } else {
      // The block continues in the next chunk: copied whole.
      if (buf_.size() < block_) buf_.resize(block_);
      data_ = buf_.data();
      len = read_bytes(buf_.data(), block_);
    }
    if (len < abi::kBlockHeaderBytes) continue;
    abi::BlockHeader bh;
    std::memcpy(&bh, data_, sizeof(bh));
    bool resuming = start < first_pos;
    bool seq_ok = resuming ? bh.first_seq <= expected_seq_ : bh.first_seq >= expected_seq_;
    if (bh.position != start || !seq_ok || bh.first_seq > expected_seq_ + (1ull << 40)) {
      ++stats_.corrupt_blocks;
      continue;
    }
    if (!resuming && bh.first_seq > expected_seq_) {
      stats_.overwritten += bh.first_seq - expected_seq_;
      expected_seq_ = bh.first_seq;
    }
    block_pos_ = start;
    buf_len_ = static_cast<uint32_t>(len);
    offset_ = abi::kBlockHeaderBytes;
    base_ticks_ = bh.base_ticks;
    seq_ = bh.first_seq;
    have_block_ = true;
    return true;
  }
  return false;
}

bool FileThreadStream::next(Record* r) {
  while (!records_.next(trace_, index_, r)) {
    if (!next_span(&records_.span)) return false;
    records_.reset();
  }
  return true;
}

bool FileThreadStream::next_span(RecordSpan* span) {
  while (!done_) {
    if (!have_block_ && !load_block()) break;
    // Records before first_pos were taken before the recording began.
    WalkEnd end = walk_block(sizer_, data_, buf_len_, block_pos_, stream_.thread.first_pos,
                             base_ticks_, &offset_, &seq_, span);
    if (end == WalkEnd::kCorrupt) ++stats_.corrupt_blocks;
    have_block_ = false;
    if (span->records > 0) {
      expected_seq_ = seq_;
      stats_.records += span->records;
      return true;
    }
  }
  done_ = true;
  chunk_.release();  // streams end one by one: free memory as they do
  scratch_.release();
  std::vector<uint8_t>().swap(buf_);
  return false;
}

}  // namespace nanotrace::reader
