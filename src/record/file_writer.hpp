// Appending chunks to a trace file (see common/file_format.hpp). Internal header.
//
// Each chunk is written with one writev (header + payload pieces), so a crash or a full
// disk leaves at most one torn chunk at the end, which readers ignore. After the first
// write error every call fails with that error; what was written before stays readable.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/file_format.hpp"
#include "nanotrace/status.hpp"

struct ZSTD_CCtx_s;

namespace nanotrace::rec {

class FileWriter {
 public:
  FileWriter() = default;
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // Creates (truncates) path and writes the file header. compress: zstd-compress DATA
  // and META payloads (level 1).
  Status open(const std::string& path, uint32_t pid, file::FileKind kind, bool compress);

  // Appends one chunk whose payload is the concatenation of pieces.
  Status write_chunk(file::ChunkType type, uint32_t slot, uint32_t generation, uint64_t position,
                     const struct iovec* pieces, int count);
  Status write_chunk(file::ChunkType type, const void* payload, uint32_t size) {
    struct iovec v = {const_cast<void*>(payload), size};
    return write_chunk(type, 0, 0, 0, &v, 1);
  }

  // Flushes to the device (fdatasync). Errors as for write_chunk.
  Status sync();
  Status close();

  uint64_t bytes_written() const { return offset_; }
  uint64_t chunks() const { return index_; }
  uint64_t data_bytes() const { return data_bytes_; }
  const std::string& path() const { return path_; }

 private:
  Status fail(int err);

  std::string path_;
  int fd_ = -1;
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
