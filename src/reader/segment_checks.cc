// Checks a segment before anything in it is trusted: its header (validate_header), and the
// moment it may be read (wait_while_created).
#include "reader/segment_checks.hpp"

#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace nanotrace::reader {
namespace {

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// end = offset + count * size, false on overflow or if past limit.
bool fits(uint64_t offset, uint64_t count, uint64_t size, uint64_t limit) {
  unsigned __int128 end =
      static_cast<unsigned __int128>(offset) + static_cast<unsigned __int128>(count) * size;
  return end <= limit;
}

}  // namespace

Status validate_header(const abi::SegmentHeader& h, uint64_t file_size, bool tables_only) {
  if (std::memcmp(h.magic, abi::kSegmentMagic, sizeof(h.magic)) != 0) {
    return Status::Corrupt("not a nanotrace segment (bad magic)");
  }
  if (h.version == 0) return Status::Corrupt("segment is still being created");
  if (h.version != abi::kSegmentVersion) {
    return Status::Unsupported("segment version " + std::to_string(h.version) +
                               " (this build reads version " +
                               std::to_string(abi::kSegmentVersion) + ")");
  }
  if (h.header_size != sizeof(abi::SegmentHeader)) return Status::Corrupt("bad header size");
  if (!tables_only && h.segment_size != file_size) {
    return Status::Corrupt("segment size " + std::to_string(h.segment_size) +
                           " does not match the file (" + std::to_string(file_size) + ")");
  }
  if (h.mode > 2) return Status::Corrupt("unknown mode " + std::to_string(h.mode));
  if (h.clock_kind > 1) return Status::Corrupt("unknown clock kind");
  if (!is_pow2(h.ring_size) || h.ring_size < 8192 || !is_pow2(h.block_size) ||
      h.block_size < abi::kBlockHeaderBytes + abi::kMaxRecordBytes ||
      h.block_size * 4 > h.ring_size) {
    return Status::Corrupt("bad ring or block size");
  }
  if (h.max_threads == 0 || h.max_threads > 65536) return Status::Corrupt("bad thread count");
  if (h.groups_count > abi::kMaxGroups ||
      !fits(h.groups_offset, abi::kMaxGroups, sizeof(abi::GroupEntry), file_size)) {
    return Status::Corrupt("group table out of bounds");
  }
  if (h.events_count > h.events_capacity || h.events_capacity > 65535 ||
      !fits(h.events_offset, h.events_capacity, sizeof(abi::EventEntry), file_size)) {
    return Status::Corrupt("event table out of bounds");
  }
  if (h.strings_used > h.strings_capacity ||
      !fits(h.strings_offset, h.strings_capacity, 1, file_size)) {
    return Status::Corrupt("string pool out of bounds");
  }
  if (tables_only) return Status::Ok();
  if (h.threads_offset % alignof(abi::ThreadSlot) != 0 ||
      !fits(h.threads_offset, h.max_threads, sizeof(abi::ThreadSlot), file_size)) {
    return Status::Corrupt("thread table out of bounds");
  }
  if (h.rings_offset % 8 != 0 || !fits(h.rings_offset, h.max_threads, h.ring_size, file_size)) {
    return Status::Corrupt("rings out of bounds");
  }
  return Status::Ok();
}

bool wait_while_created(int fd, struct stat* st) {
  for (int waited_ms = 0; waited_ms < 1000; ++waited_ms) {
    if (static_cast<uint64_t>(st->st_size) >= sizeof(abi::SegmentHeader)) {
      uint32_t version = 0;
      if (::pread(fd, &version, sizeof(version), offsetof(abi::SegmentHeader, version)) !=
              static_cast<ssize_t>(sizeof(version)) ||
          version != 0) {
        return true;
      }
    }
    if (!sys::segment_byte_locked(fd, sys::kWriterLockByte)) return true;  // no creator at work
    ::usleep(1000);
    if (::fstat(fd, st) != 0) return false;
  }
  return true;
}

}  // namespace nanotrace::reader
