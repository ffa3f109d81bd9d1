// `nanotrace clean`: remove the /dev/shm segments of processes that are gone. A segment is
// live while its process holds the writer lock on it (the kernel drops the lock when the
// process dies or execs), so a live process's segment is never removed, and one left by an
// image that exec'd, by a dead process or by an earlier holder of a reused pid goes.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/process.hpp"
#include "kernel/ftrace_instance.hpp"
#include "nanotrace/abi.hpp"
#include "nanotrace/record.hpp"

namespace nanotrace {

std::vector<StaleSegment> clean_segments(bool dry_run) {
  std::vector<StaleSegment> out;
  for (const sys::SegmentName& segment : sys::list_segment_names()) {
    StaleSegment e;
    e.path = segment.path;
    e.pid = segment.pid;
    // Identity from the header itself (pid + start time), read without trusting the rest.
    int fd = ::open(e.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st;
    abi::SegmentHeader h{};
    bool readable = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                    ::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
                    std::memcmp(h.magic, abi::kSegmentMagic, sizeof(h.magic)) == 0;
    bool locked = readable && sys::segment_byte_locked(fd, sys::kWriterLockByte);
    ::close(fd);
    e.bytes = uint64_t(st.st_blocks) * 512;
    uint64_t start_time = 0;
    if (readable) {
      e.name.assign(h.user_name[0] ? h.user_name : h.process_name,
                    ::strnlen(h.user_name[0] ? h.user_name : h.process_name, 64));
      if (h.pid == e.pid) start_time = h.proc_start_time;
    }
    if (locked) continue;
    // A segment still being created by a live process has no valid header yet: an unreadable
    // segment goes only if its pid is dead. A header of an older version (no writer lock)
    // is judged by pid and start time.
    if (!readable || h.version < abi::kSegmentVersion) {
      if (sys::process_alive(e.pid, start_time)) continue;
    }
    if (!dry_run && unlink(e.path.c_str()) != 0) e.error = std::strerror(errno);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const StaleSegment& a, const StaleSegment& b) { return a.pid < b.pid; });
  return out;
}

std::vector<StaleKernelInstance> clean_kernel_instances(bool dry_run) {
  std::vector<StaleKernelInstance> out;
  for (kernel::StaleInstance& s : kernel::remove_stale_instances(dry_run)) {
    out.push_back({std::move(s.name), s.pid, std::move(s.error)});
  }
  return out;
}

}  // namespace nanotrace
