// Finding traced processes: every /dev/shm/nanotrace-<pid> segment, alive or left behind.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "nanotrace/reader.hpp"

namespace nanotrace {

std::vector<ProcessEntry> list_processes() {
  std::vector<ProcessEntry> out;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (dirent* d = readdir(dir)) {
    std::string name = d->d_name;
    if (name.rfind("nanotrace-", 0) != 0) continue;
    std::string digits = name.substr(10);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    ProcessEntry e;
    e.info.path = "/dev/shm/" + name;
    struct stat st;
    if (stat(e.info.path.c_str(), &st) == 0) e.resident_bytes = uint64_t(st.st_blocks) * 512;
    e.info.pid = static_cast<uint32_t>(std::stoul(digits));
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
  closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const ProcessEntry& a, const ProcessEntry& b) { return a.info.pid < b.info.pid; });
  return out;
}

}  // namespace nanotrace
