// Reading one CPU's raw ftrace sub-buffers back as Records.
#include "reader/kernel_stream.hpp"

extern "C" {
#include <kbuffer.h>
}

#include <algorithm>
#include <cstring>

#include "reader/trace_internals.hpp"

namespace nanotrace::reader {
namespace {

constexpr uint32_t kCommitMask = (1u << 27) - 1;
constexpr uint64_t kMissingEvents = 1ull << 31;
constexpr uint64_t kMissingStored = 1ull << 30;
constexpr size_t kSlack = 64;
// Ring-buffer event types above the data lengths (type_len).
constexpr uint32_t kPadding = 29, kTimeExtend = 30, kTimeStamp = 31;

uint32_t read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

KernelCpuStream::KernelCpuStream(const Trace& trace, std::shared_ptr<const TraceFile> file,
                                 std::shared_ptr<const KernelTables> tables, uint32_t cpu_index,
                                 uint32_t thread)
    : trace_(trace),
      file_(std::move(file)),
      tables_(std::move(tables)),
      cpu_(file_->kernel_data[cpu_index]),
      k_(static_cast<size_t>(std::max(tables_->index_of(cpu_.node), 0))),
      thread_(thread) {
  // A node's CPUs belong to it: their entry names its first process (ThreadInfo::process),
  // and their clock values are mapped onto the trace's as its records' are.
  if (cpu_.node < file_->nodes.size()) {
    const uint32_t first = file_->nodes[cpu_.node].first_process;
    stats_.info.process = first;
    alignment_ = TraceInternals::clock_alignment(trace, first);
  }
  // Slots number the trace's CPUs, every node's after the previous nodes' (streams and
  // outputs per CPU keep them apart); Record::cpu is the node's own CPU number.
  stats_.info.slot = cpu_.cpu;
  for (size_t k = 0; k < k_; ++k) stats_.info.slot += tables_->meta(k).cpus;
  stats_.info.name = "cpu" + std::to_string(cpu_.cpu);
  stats_.info.kernel = true;
  stats_.info.state = abi::SlotState::kExited;
  for (const file::KernelCpuLoss& l : tables_->meta(k_).losses) {
    if (l.cpu != cpu_.cpu) continue;
    stats_.overwritten = l.overrun;
    stats_.dropped = l.dropped;
  }
  page_.assign(tables_->meta(k_).page_size + kSlack, 0);
  kbuf_ = kbuffer_alloc(tables_->meta(k_).long_size == 8 ? KBUFFER_LSIZE_8 : KBUFFER_LSIZE_4,
                        KBUFFER_ENDIAN_LITTLE);
}

KernelCpuStream::~KernelCpuStream() {
  if (kbuf_) kbuffer_free(kbuf_);
}

bool KernelCpuStream::page_checks_out() const {
  const uint32_t header = tables_->page_header_bytes(k_);
  const uint32_t room = tables_->meta(k_).page_size - header;
  uint64_t flags = 0;
  std::memcpy(&flags, page_.data() + 8, tables_->meta(k_).long_size);
  const uint32_t commit = static_cast<uint32_t>(flags) & kCommitMask;
  if (commit > room) return false;
  if ((flags & kMissingEvents) && (flags & kMissingStored) &&
      commit + tables_->meta(k_).long_size > room) {
    return false;
  }
  // The walk kbuffer will make (its translate_data), refusing any step that does not move
  // forward or a data event that ends past the commit.
  const uint8_t* data = page_.data() + header;
  uint32_t curr = 0;
  while (curr < commit) {
    const uint32_t word = read32(data + curr);
    const uint32_t type_len = word & 31;
    uint32_t index = curr + 4;
    int32_t length;
    bool is_data = false;
    if (type_len == kPadding) {
      length = static_cast<int32_t>(read32(data + index));
    } else if (type_len == kTimeExtend || type_len == kTimeStamp) {
      index += 4;
      length = 0;
    } else if (type_len == 0) {
      length = static_cast<int32_t>(read32(data + index) - 4);
      length = (length + 3) & ~3;
      index += 4;
      is_data = true;
    } else {
      length = static_cast<int32_t>(type_len * 4);
      is_data = true;
    }
    const int64_t next = static_cast<int64_t>(index) + length;
    if (next <= curr || next > (int64_t{1} << 31)) return false;
    if (is_data && next > commit) return false;
    curr = static_cast<uint32_t>(next);
  }
  return true;
}

bool KernelCpuStream::load_page() {
  const uint32_t page_size = tables_->meta(k_).page_size;
  for (;;) {
    if (page_in_chunk_ >= pages_in_chunk_) {
      if (next_extent_ >= cpu_.extents.size()) return false;
      const Extent& e = cpu_.extents[next_extent_++];
      Status s = file_->read_extent(e, &chunk_, &scratch_);
      if (!s.ok() || chunk_.size() % page_size != 0) {
        ++stats_.corrupt_blocks;
        continue;
      }
      page_in_chunk_ = 0;
      pages_in_chunk_ = chunk_.size() / page_size;
      continue;
    }
    std::memcpy(page_.data(), chunk_.data() + page_in_chunk_ * page_size, page_size);
    ++page_in_chunk_;
    if (!page_checks_out()) {
      ++stats_.corrupt_blocks;
      continue;
    }
    if (kbuffer_load_subbuffer(kbuf_, page_.data()) != 0) {
      ++stats_.corrupt_blocks;
      continue;
    }
    first_in_page_ = true;
    return true;
  }
}

bool KernelCpuStream::next(Record* r) {
  if (!kbuf_) return false;
  for (;;) {
    if (!page_open_) {
      if (!load_page()) {
        chunk_.release();
        scratch_.release();
        return false;
      }
      page_open_ = true;
    }
    unsigned long long ts = 0;
    void* ev = first_in_page_ ? kbuffer_read_event(kbuf_, &ts) : kbuffer_next_event(kbuf_, &ts);
    first_in_page_ = false;
    if (!ev) {
      page_open_ = false;
      continue;
    }
    const auto* p = static_cast<const uint8_t*>(ev);
    const int size = kbuffer_event_size(kbuf_);
    const uint32_t limit = tables_->meta(k_).page_size;
    if (size <= 0 || p < page_.data() ||
        static_cast<size_t>(p - page_.data()) + static_cast<size_t>(size) > limit) {
      ++stats_.corrupt_blocks;
      page_open_ = false;
      continue;
    }
    if (!tables_->decode(k_, p, static_cast<uint32_t>(size), r, &text_)) continue;  // not stored
    r->ticks = alignment_ != nullptr ? file::align_ticks(*alignment_, ts) : ts;
    r->time_ns = trace_.ticks_to_ns(r->ticks);
    r->seq = seq_++;
    r->thread = thread_;
    r->cpu = cpu_.cpu;
    ++stats_.records;
    return true;
  }
}

}  // namespace nanotrace::reader
