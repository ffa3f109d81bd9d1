// Reading trace files (base/file_format.hpp): the chunk index built when a file is opened,
// and one thread generation's records read back block by block. Internal header.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/file_format.hpp"
#include "base/node_meta.hpp"
#include "nanotrace/reader.hpp"
#include "reader/thread_stream.hpp"

namespace nanotrace::reader {

class ExtentPrefetcher;
class ExtentSlot;

// Where one DATA chunk's bytes are.
struct Extent {
  uint64_t offset;  // of the payload in the file
  uint32_t stored;
  uint32_t raw;
  uint32_t crc;
  uint16_t flags;
  uint64_t position;  // ring position of the first byte
};

struct FileStream {
  file::ThreadPayload thread{};
  uint32_t process = 0;         // index into TraceFile::processes
  std::vector<Extent> extents;  // increasing, non-overlapping positions
  uint64_t end = 0;             // position after the last extent
  file::LossEntry loss{};
  bool has_loss = false;
};

// One node's kernel events: its last valid KERNEL_META payload (decoded when the trace opens)
// and what it says of the KERNEL_DATA chunks.
struct KernelNode {
  uint32_t node = 0;  // the node its chunks name (version 4: slot >> 16; before: 0)
  std::vector<uint8_t> meta;
  uint32_t page_size = 0;
  uint32_t cpus = 0;
};

// One CPU's KERNEL_DATA chunks: raw ftrace sub-buffers, in the order they were read.
struct KernelCpuExtents {
  uint32_t node = 0;  // KernelNode::node
  uint32_t cpu = 0;
  std::vector<Extent> extents;  // each a whole number of sub-buffers
  uint64_t end = 0;             // the CPU's byte count after the last extent
};

// A chunk payload read back. Unlike a vector it does not zero what it grows into, since a
// read fills it at once, and it keeps its capacity from chunk to chunk.
class ChunkBuffer {
 public:
  uint8_t* data() { return bytes_.get(); }
  const uint8_t* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  void resize(size_t n) {
    if (n > capacity_) {
      bytes_.reset(new uint8_t[n]);  // not value-initialised: no zeroing
      capacity_ = n;
    }
    size_ = n;
  }
  void release() {
    bytes_.reset();
    size_ = capacity_ = 0;
  }

 private:
  std::unique_ptr<uint8_t[]> bytes_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// A trace file's index: every chunk up to the first invalid one was checked (header and
// payload checksums, sizes, ordering) before anything in it is used.
struct TraceFile {
  // Opens and indexes path. Errors: kNotFound, kIoError, kCorrupt (no valid header or no
  // event tables), kUnsupported (another version). A damaged or cut tail is not an error:
  // the valid prefix is used and `warning` says what was ignored.
  static Result<std::shared_ptr<TraceFile>> open(const std::string& path);
  // True if path starts with the trace file magic.
  static bool has_magic(const std::string& path);

  ~TraceFile();
  // Reads and checks one chunk payload; raw gets the uncompressed bytes.
  Status read_extent(const Extent& e, ChunkBuffer* raw, ChunkBuffer* scratch) const;

  std::string path;
  int fd = -1;
  uint64_t size = 0;
  file::FileHeader header{};
  std::vector<uint8_t> meta;  // last META payload of the first process: a compacted table region
  // Every process of the file (version 2: several), by increasing process index.
  struct Process {
    uint32_t index = 0;  // the chunks' slot >> 16
    std::vector<uint8_t> meta;
    uint64_t lost_no_slot = 0;
    uint64_t lost_reclaimed = 0;
  };
  std::vector<Process> processes;
  // Version 3: the nodes (NODE chunks) by node index, and each process's node (by position
  // in processes). Both empty in a file without NODE chunks (one node, not described).
  std::vector<file::NodePayload> nodes;
  std::vector<uint32_t> process_node;
  std::vector<FileStream> streams;
  // Kernel events (KERNEL_META, KERNEL_DATA) of each node that has them (one before version
  // 4), in the order their first KERNEL_META came, and the data extents of each node's CPUs.
  // A kernel chunk whose payload does not check out is left out with kernel_warning set (a
  // KERNEL_META: that node's kernel events); the user-space data is unaffected.
  std::vector<KernelNode> kernel_nodes;
  std::vector<KernelCpuExtents> kernel_data;
  std::string kernel_warning;
  uint64_t lost_no_slot = 0;  // of the first process
  uint64_t lost_reclaimed = 0;
  bool has_end = false;
  file::EndPayload end{};
  uint64_t chunks = 0;
  std::string warning;
};

// One thread generation of a trace file, parsed block by block exactly like a live ring:
// the block header's position and first_seq are checked, records are decoded with
// decode_record, sequence gaps are counted as overwritten.
class FileThreadStream {
 public:
  // info: trace.threads()[index].
  // prefetcher: reads the stream's next chunk ahead if it has budget to spare (may be null).
  FileThreadStream(const Trace& trace, std::shared_ptr<const TraceFile> file, uint32_t index,
                   const ThreadInfo& info, std::shared_ptr<ExtentPrefetcher> prefetcher);
  ~FileThreadStream();
  bool next(Record* record);
  bool next_span(RecordSpan* span);
  // UncheckedSpanSource's part: blocks handed out before they are walked.
  const RecordSizer* unchecked_sizer() const {
    return id_map_.empty() && alignment_ == nullptr ? &sizer_ : nullptr;
  }
  bool next_unchecked(RecordSpan* span);
  void finish_unchecked(uint32_t records, bool corrupt);
  const ThreadStats& stats() const { return stats_; }

 private:
  bool load_block();
  // At the stream's end: frees its buffers.
  void end();
  // Copies up to n contiguous bytes at cursor_ (dst may be null: skip). Stops at a gap.
  uint64_t read_bytes(uint8_t* dst, uint64_t n);
  // Moves to the next extent when the current one is used up. False at the end.
  bool ensure_data();
  // Rewrites the event ids of span's records from the process's own to the trace's.
  void map_event_ids(const RecordSpan& span);
  // Rewrites the clock stamps of span's records from the node's clock to the trace's.
  void map_ticks(RecordSpan* span);

  const Trace& trace_;
  const std::vector<uint16_t>& id_map_;  // empty: the process's ids are the trace's
  const file::NodePayload* alignment_;   // null: the process's clock is the trace's
  RecordSizer sizer_;
  SpanRecords records_;
  std::shared_ptr<const TraceFile> file_;
  const FileStream& stream_;
  uint32_t index_;
  uint64_t block_size_;
  ThreadStats stats_;
  ChunkBuffer chunk_, scratch_;
  std::vector<uint8_t> buf_;  // a block that spans two chunks, copied whole
  size_t next_extent_ = 0;
  uint64_t chunk_pos_ = 0;  // position of chunk_[0]
  uint64_t cursor_ = 0;     // next position to read
  bool have_chunk_ = false;
  OpenBlock block_;  // in chunk_, or buf_
  uint64_t expected_seq_ = 0;
  uint64_t unchecked_first_seq_ = 0;  // of the span next_unchecked() handed out
  bool unchecked_walked_ = false;     // that span was walked (and counted) already
  bool done_ = false;
  // The next extent, read ahead; null without a share of the prefetcher. Last: it is
  // destroyed first, while what its read uses (file_) is still there.
  std::unique_ptr<ExtentSlot> ahead_;
};

// A file thread stream as a SpanSource that can also hand out unchecked spans.
class FileSpanSource final : public SpanSource, public UncheckedSpanSource {
 public:
  explicit FileSpanSource(std::unique_ptr<FileThreadStream> stream) : stream_(std::move(stream)) {}
  bool next(RecordSpan* span) override { return stream_->next_span(span); }
  const ThreadStats& stats() const override { return stream_->stats(); }
  const RecordSizer* unchecked_sizer() const override { return stream_->unchecked_sizer(); }
  bool next_unchecked(RecordSpan* span) override { return stream_->next_unchecked(span); }
  void finish_unchecked(uint32_t records, bool corrupt) override {
    stream_->finish_unchecked(records, corrupt);
  }

 private:
  std::unique_ptr<FileThreadStream> stream_;
};

}  // namespace nanotrace::reader
