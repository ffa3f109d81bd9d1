// Finding traced processes: every /dev/shm/nanotrace-<pid> segment, alive or left behind.
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "base/process.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {

std::vector<ProcessEntry> list_processes() {
  std::vector<ProcessEntry> out;
  for (const sys::SegmentName& segment : sys::list_segment_names()) {
    ProcessEntry e;
    e.info.path = segment.path;
    struct stat st;
    if (stat(e.info.path.c_str(), &st) == 0) e.resident_bytes = uint64_t(st.st_blocks) * 512;
    e.info.pid = segment.pid;
    auto trace = Trace::open_path(e.info.path);
    if (!trace.ok()) {
      e.error = trace.status().message();
      out.push_back(std::move(e));
      continue;
    }
    e.info = (*trace)->process();
    for (const ThreadInfo& t : (*trace)->threads()) {
      ++e.threads;
      e.events += t.written;
      e.lost += t.dropped;
    }
    e.lost += e.info.lost_no_slot + e.info.lost_reclaimed;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const ProcessEntry& a, const ProcessEntry& b) { return a.info.pid < b.info.pid; });
  return out;
}

}  // namespace nanotrace
