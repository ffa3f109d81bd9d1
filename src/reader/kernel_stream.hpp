// One CPU's kernel events from a trace file: its KERNEL_DATA extents, sub-buffer by
// sub-buffer, each checked (commit size, and a walk of the event headers: kbuffer trusts
// them, and a hostile length could send it backwards for ever) and then read with kbuffer.
// Internal header.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"
#include "reader/kernel_tables.hpp"
#include "reader/trace_file.hpp"

struct kbuffer;

namespace nanotrace::reader {

class KernelCpuStream {
 public:
  // cpu_index: into file->kernel_data; thread: the Record::thread its records carry.
  KernelCpuStream(const Trace& trace, std::shared_ptr<const TraceFile> file,
                  std::shared_ptr<const KernelTables> tables, uint32_t cpu_index, uint32_t thread);
  ~KernelCpuStream();
  bool next(Record* record);
  const ThreadStats& stats() const { return stats_; }

 private:
  bool load_page();
  // True if the sub-buffer at page_ can be walked safely by kbuffer.
  bool page_checks_out() const;

  const Trace& trace_;
  std::shared_ptr<const TraceFile> file_;
  std::shared_ptr<const KernelTables> tables_;
  const KernelCpuExtents& cpu_;
  size_t k_;                                      // its node's tables (KernelTables::index_of)
  const file::NodePayload* alignment_ = nullptr;  // null: the node's clock is the trace's
  uint32_t thread_;
  ThreadStats stats_;
  kbuffer* kbuf_ = nullptr;
  ChunkBuffer chunk_, scratch_;
  std::vector<uint8_t> page_;  // one sub-buffer and zeroed slack for kbuffer's look-ahead
  size_t next_extent_ = 0;
  size_t page_in_chunk_ = 0;
  size_t pages_in_chunk_ = 0;
  bool page_open_ = false;
  bool first_in_page_ = false;
  uint64_t seq_ = 0;
  std::array<std::string, abi::kMaxFields> text_;
};

}  // namespace nanotrace::reader
