// Reading a byte range of a file (a segment or a trace file) with pread(2), whatever the
// kernel returns in one call: the one loop the readers and the recorder share. Internal header.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace nanotrace::sys {

// Reads up to n bytes at offset into dst, retrying short reads and EINTR. Returns the bytes
// read: n, or fewer at the end of the file or on an error (then errno says which, and is 0
// at the end of the file).
inline uint64_t read_at(int fd, void* dst, uint64_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  errno = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += static_cast<uint64_t>(r);
  }
  return done;
}

}  // namespace nanotrace::sys
