// Trace file writer: header, then checksummed chunks appended with one writev each.
// Uncompressed payloads go straight from the caller's pieces to the kernel (no gathering
// copy); compressed ones are gathered, compressed with zstd level 1, then written. The copy
// source path (copy_file_range, splice) exists to be measured against writev: see
// docs/format.md, "How the recorder copies".
#include "record/file_writer.hpp"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>

#include "base/clock.hpp"
#include "base/output_file.hpp"

namespace nanotrace::rec {

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
  for (int p : pipe_) {
    if (p >= 0) ::close(p);
  }
  if (cctx_) ZSTD_freeCCtx(cctx_);
}

Status FileWriter::set_copy_source(int fd, bool splice) {
  if (splice && pipe_[0] < 0) {
    if (pipe2(pipe_, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
    // A bigger pipe moves more per pair of splice calls; the default limit allows 1 MiB.
    (void)fcntl(pipe_[1], F_SETPIPE_SZ, 1 << 20);
    int size = fcntl(pipe_[1], F_GETPIPE_SZ);
    pipe_size_ = size > 0 ? static_cast<uint64_t>(size) : 4096;
  }
  source_fd_ = fd;
  splice_ = splice;
  return Status::Ok();
}

Status FileWriter::fail(int err) {
  if (err == ENOSPC) {
    error_ = Status::IoError("writing " + path_ + ": no space left on device (the file up to " +
                             std::to_string(offset_) + " bytes stays readable)");
  } else {
    error_ = Status::FromErrno("writing " + path_, err);
  }
  return error_;
}

Status FileWriter::open(const std::string& path, uint32_t pid, file::FileKind kind, bool compress,
                        int source_fd, uint32_t version) {
  path_ = path;
  compress_ = compress;
  auto fd = create_output_file(path, source_fd);
  if (!fd.ok()) return fd.status();
  fd_ = *fd;
  if (compress_) {
    cctx_ = ZSTD_createCCtx();
    if (!cctx_) return Status::IoError("zstd: cannot create a compression context");
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 1);
  }
  file::FileHeader h{};
  std::memcpy(h.magic, file::kFileMagic, sizeof(h.magic));
  h.version = version;
  h.header_size = sizeof(h);
  h.pid = pid;
  h.kind = static_cast<uint32_t>(kind);
  h.created_ns = sys::realtime_ns();
  h.header_crc = file::crc32c(0, &h, offsetof(file::FileHeader, header_crc));
  ssize_t n = ::write(fd_, &h, sizeof(h));
  if (n != static_cast<ssize_t>(sizeof(h))) return fail(n < 0 ? errno : ENOSPC);
  offset_ = sizeof(h);
  return Status::Ok();
}

Status FileWriter::write_chunk(file::ChunkType type, uint32_t slot, uint32_t generation,
                               uint64_t position, const struct iovec* pieces, int count,
                               const uint64_t* source_offsets) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return Status::Invalid("trace file is not open");
  uint64_t raw = 0;
  for (int i = 0; i < count; ++i) raw += pieces[i].iov_len;
  if (raw > file::kMaxChunkBytes) return Status::Invalid("chunk payload too large");
  file::ChunkHeader h{};
  h.magic = file::kChunkMagic;
  h.type = static_cast<uint16_t>(type);
  h.slot = slot;
  h.generation = generation;
  h.position = position;
  h.index = index_;
  h.raw_size = static_cast<uint32_t>(raw);
  struct iovec out[9];
  int nout = 0;
  out[nout++] = {&h, sizeof(h)};
  uint32_t crc = 0;
  bool packed = false;
  if (compress_ && raw >= 512 && type != file::ChunkType::kThread) {
    scratch_.resize(raw);
    uint64_t at = 0;
    for (int i = 0; i < count; ++i) {
      std::memcpy(scratch_.data() + at, pieces[i].iov_base, pieces[i].iov_len);
      at += pieces[i].iov_len;
    }
    packed_.resize(ZSTD_compressBound(raw));
    size_t z = ZSTD_compress2(cctx_, packed_.data(), packed_.size(), scratch_.data(), raw);
    if (!ZSTD_isError(z) && z < raw) {
      packed = true;
      h.flags = file::kChunkZstd;
      h.stored_size = static_cast<uint32_t>(z);
      crc = file::crc32c(0, packed_.data(), z);
      out[nout++] = {packed_.data(), z};
    }
  }
  if (!packed) {
    if (count > 8) return Status::Invalid("too many chunk pieces");
    h.stored_size = h.raw_size;
    for (int i = 0; i < count; ++i) {
      crc = file::crc32c(crc, pieces[i].iov_base, pieces[i].iov_len);
      out[nout++] = pieces[i];
    }
  }
  h.payload_crc = crc;
  h.header_crc = file::crc32c(0, &h, offsetof(file::ChunkHeader, header_crc));
  uint64_t total = sizeof(h) + h.stored_size;
  Status w;
  if (!packed && source_offsets != nullptr && source_fd_ >= 0) {
    w = write_all(out, 1);
    for (int i = 0; i < count && w.ok(); ++i) {
      w = copy_from_source(source_offsets[i], pieces[i].iov_len,
                           static_cast<const uint8_t*>(pieces[i].iov_base));
    }
  } else {
    w = write_all(out, nout);
  }
  if (!w.ok()) return w;
  offset_ += total;
  ++index_;
  if (type == file::ChunkType::kData) data_bytes_ += raw;
  return Status::Ok();
}

Status FileWriter::write_stored_chunk(const file::ChunkHeader& like, uint32_t slot,
                                      const void* stored) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return Status::Invalid("trace file is not open");
  file::ChunkHeader h = like;
  h.slot = slot;
  h.index = index_;
  h.header_crc = file::crc32c(0, &h, offsetof(file::ChunkHeader, header_crc));
  struct iovec out[2] = {{&h, sizeof(h)}, {const_cast<void*>(stored), h.stored_size}};
  if (Status w = write_all(out, 2); !w.ok()) return w;
  offset_ += sizeof(h) + h.stored_size;
  ++index_;
  if (h.type == static_cast<uint16_t>(file::ChunkType::kData)) data_bytes_ += h.raw_size;
  return Status::Ok();
}

Status FileWriter::write_all(struct iovec* v, int n) {
  int first = 0;
  while (first < n) {
    ssize_t done = ::writev(fd_, v + first, n - first);
    if (done < 0) {
      if (errno == EINTR) continue;
      return fail(errno);
    }
    if (done == 0) return fail(ENOSPC);
    // Advance past what was written (short writes happen on a nearly full disk).
    auto left = static_cast<size_t>(done);
    while (first < n && left >= v[first].iov_len) left -= v[first++].iov_len;
    if (first < n) {
      v[first].iov_base = static_cast<uint8_t*>(v[first].iov_base) + left;
      v[first].iov_len -= left;
    }
  }
  return Status::Ok();
}

Status FileWriter::copy_from_source(uint64_t offset, uint64_t size, const uint8_t* mem) {
  auto in = static_cast<loff_t>(offset);
  uint64_t done = 0;
  while (done < size && source_fd_ >= 0) {
    ssize_t n;
    if (splice_) {
      uint64_t want = size - done < pipe_size_ ? size - done : pipe_size_;
      n = ::splice(source_fd_, &in, pipe_[1], nullptr, want, SPLICE_F_MOVE);
      for (ssize_t out = 0; n > 0 && out < n;) {
        ssize_t m =
            ::splice(pipe_[0], nullptr, fd_, nullptr, static_cast<size_t>(n - out), SPLICE_F_MOVE);
        if (m < 0 && errno == EINTR) continue;
        // The pipe still holds bytes: nothing more can be written consistently.
        if (m <= 0) return fail(m < 0 ? errno : ENOSPC);
        out += m;
      }
    } else {
      n = ::copy_file_range(source_fd_, &in, fd_, nullptr, size - done, 0);
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && done == 0 &&
        (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
      source_fd_ = -1;  // the kernel cannot do it here: write from memory from now on
      break;
    }
    if (n < 0) return fail(errno);
    if (n == 0) return fail(ENOSPC);
    done += static_cast<uint64_t>(n);
  }
  if (done == size) return Status::Ok();
  struct iovec v = {const_cast<uint8_t*>(mem + done), size - done};
  return write_all(&v, 1);
}

Status FileWriter::sync() {
  if (!error_.ok()) return error_;
  if (fd_ >= 0 && fdatasync(fd_) != 0) return fail(errno);
  return Status::Ok();
}

Status FileWriter::close() {
  if (fd_ < 0) return error_;
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 && error_.ok()) return fail(errno);
  return error_;
}

}  // namespace nanotrace::rec
