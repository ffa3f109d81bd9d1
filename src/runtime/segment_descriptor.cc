// The segment's descriptor, kept ours. A program that closes every descriptor it did not
// open (a daemon), traced without `run`'s interposer (which keeps our descriptor open), may
// close it and give its number to a file of its own. Allocating ring memory through that
// number would grow the program's file. So every allocation checks the descriptor's identity
// first, and the segment is opened again by its path when the number was taken; a number the
// program took is its own, never closed. The writer lock stays held meanwhile: it belongs to
// the open file, which our mapping keeps open whatever happens to the descriptor.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.hpp"

namespace nanotrace::runtime {

bool note_segment_identity(Segment* seg) {
  struct stat st;
  if (fstat(seg->fd, &st) != 0) return false;
  seg->dev = st.st_dev;
  seg->ino = st.st_ino;
  return true;
}

// The descriptor is published with a release and read with an acquire: the thread that
// opened it again happens before every use of it by another.
bool segment_fd_is_ours(const Segment& seg) {
  const int fd = __atomic_load_n(&seg.fd, __ATOMIC_ACQUIRE);
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == seg.dev && st.st_ino == seg.ino;
}

bool reclaim_segment_fd(Segment* seg) {
  if (segment_fd_is_ours(*seg)) return true;
  if (seg->path.empty()) return false;
  const int fd = ::open(seg->path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st;
  // The path may have been removed meanwhile (`nanotrace clean`, run by hand) and now name
  // another file.
  if (fstat(fd, &st) != 0 || st.st_dev != seg->dev || st.st_ino != seg->ino) {
    ::close(fd);
    return false;
  }
  __atomic_store_n(&seg->fd, fd, __ATOMIC_RELEASE);
  return true;
}

void destroy_segment(Segment* seg, bool unlink) {
  if (seg->base) munmap(seg->base, seg->size);
  if (segment_fd_is_ours(*seg)) ::close(seg->fd);
  if (unlink && !seg->path.empty()) ::unlink(seg->path.c_str());
  *seg = Segment();
}

}  // namespace nanotrace::runtime
