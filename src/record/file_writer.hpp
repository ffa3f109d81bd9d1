// Appending chunks to a trace file (see base/file_format.hpp). Internal header.
//
// Each chunk is written with one writev (header + payload pieces), so a crash or a full
// disk leaves at most one torn chunk at the end, which readers ignore. After the first
// write error every call fails with that error; what was written before stays readable.
// With a copy source, DATA payloads the caller can also name as ranges of that file are
// copied by the kernel instead (header first, then the payload: still one torn chunk at most).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/file_format.hpp"
#include "nanotrace/status.hpp"

struct ZSTD_CCtx_s;

namespace nanotrace::rec {

class FileWriter {
 public:
  FileWriter() = default;
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // Creates path (create_output_file: a new file, mode 0600, never source_fd's file) and
  // writes the file header. compress: zstd-compress DATA and META payloads (level 1).
  // version: the header's (file_format.hpp: 4 only for what version 3 cannot say).
  Status open(const std::string& path, uint32_t pid, file::FileKind kind, bool compress,
              int source_fd = -1, uint32_t version = file::kWrittenFileVersion);

  // Appends one chunk whose payload is the concatenation of pieces. source_offsets (or
  // null): where each piece also lies in the copy source, the same bytes.
  Status write_chunk(file::ChunkType type, uint32_t slot, uint32_t generation, uint64_t position,
                     const struct iovec* pieces, int count,
                     const uint64_t* source_offsets = nullptr);
  Status write_chunk(file::ChunkType type, const void* payload, uint32_t size) {
    struct iovec v = {const_cast<void*>(payload), size};
    return write_chunk(type, 0, 0, 0, &v, 1);
  }

  // Appends a chunk whose payload is another file's, in its stored form (compressed or not)
  // and already checked against like.payload_crc: like's type, flags, sizes, generation and
  // position, with this file's next index and `slot`.
  Status write_stored_chunk(const file::ChunkHeader& like, uint32_t slot, const void* stored);

  // Payloads named by source offsets are copied from fd (not owned; it must stay open) with
  // copy_file_range, or with splice through a pipe. If the kernel refuses (another file
  // system, say), the rest goes through write from memory.
  Status set_copy_source(int fd, bool splice);

  // Flushes to the device (fdatasync). Errors as for write_chunk.
  Status sync();
  Status close();

  uint64_t bytes_written() const { return offset_; }
  uint64_t chunks() const { return index_; }
  uint64_t data_bytes() const { return data_bytes_; }
  const std::string& path() const { return path_; }

 private:
  Status fail(int err);
  Status write_all(struct iovec* v, int n);
  // Copies [offset, offset + size) of the copy source to the file; mem: the same bytes.
  Status copy_from_source(uint64_t offset, uint64_t size, const uint8_t* mem);

  std::string path_;
  int fd_ = -1;
  int source_fd_ = -1;
  bool splice_ = false;
  int pipe_[2] = {-1, -1};
  uint64_t pipe_size_ = 0;
  bool compress_ = false;
  ZSTD_CCtx_s* cctx_ = nullptr;
  std::vector<uint8_t> scratch_;  // gathered payload (compression input)
  std::vector<uint8_t> packed_;   // compressed payload
  uint64_t offset_ = 0;
  uint64_t index_ = 0;
  uint64_t data_bytes_ = 0;
  Status error_;
};

}  // namespace nanotrace::rec
