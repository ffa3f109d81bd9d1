// Process identity and futex helpers (see process.hpp).
#include "base/process.hpp"

#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

namespace nanotrace::sys {

// Asked once per process: in a virtual machine every cpuid instruction traps to the hypervisor
// (about 6 us here), and __get_cpuid would add a third to check the maximum leaf.
bool tsc_is_invariant() {
  static const bool invariant = [] {
    unsigned eax, ebx, ecx, edx;
    __cpuid(0x80000000u, eax, ebx, ecx, edx);
    if (eax < 0x80000007u) return false;
    __cpuid(0x80000007u, eax, ebx, ecx, edx);
    return (edx & (1u << 8)) != 0;
  }();
  return invariant;
}

std::string read_proc_file(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

uint64_t proc_start_time(uint32_t pid) {
  std::string line = read_proc_file(("/proc/" + std::to_string(pid) + "/stat").c_str());
  if (line.empty()) return 0;
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  // After "pid (comm) ", the state is field 3; starttime is field 22.
  size_t pos = close + 2;
  for (int field = 3; field < 22 && pos < line.size(); ++field) {
    pos = line.find(' ', pos);
    if (pos == std::string::npos) return 0;
    ++pos;
  }
  return std::strtoull(line.c_str() + pos, nullptr, 10);
}

uint64_t pidfd_identity(int pidfd) {
  constexpr long kPidfsMagic = 0x50494446;  // before pidfs, every pidfd shared one inode
  struct stat st;
  struct statfs fs;
  bool pidfs = fstatfs(pidfd, &fs) == 0 && fs.f_type == kPidfsMagic && fstat(pidfd, &st) == 0;
  return pidfs ? static_cast<uint64_t>(st.st_ino) : 0;
}

uint64_t process_identity(uint32_t pid) {
  if (pid == 0 || pid > INT_MAX) return 0;
  int fd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (fd < 0) return 0;
  const uint64_t identity = pidfd_identity(fd);
  close(fd);
  return identity;
}

bool process_alive(uint32_t pid, uint64_t start_time, uint64_t identity) {
  if (pid == 0 || pid > INT_MAX) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  if (identity != 0) {
    if (const uint64_t now = process_identity(pid); now != 0) return now == identity;
  }
  if (start_time == 0) return true;
  uint64_t now = proc_start_time(pid);
  return now == 0 || now == start_time;
}

std::vector<SegmentName> list_segment_names() {
  std::vector<SegmentName> out;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (dirent* d = readdir(dir)) {
    std::string name = d->d_name;
    if (name.rfind("nanotrace-", 0) != 0) continue;
    // nanotrace-<pid>, or nanotrace-<pid>.<start time>: a dead process's segment set aside
    // when its pid was reused.
    std::string digits = name.substr(10);
    size_t dot = digits.find('.');
    std::string suffix = dot == std::string::npos ? std::string() : digits.substr(dot + 1);
    if (dot != std::string::npos) digits.resize(dot);
    auto is_number = [](const std::string& s, size_t max) {
      return !s.empty() && s.size() <= max && s.find_first_not_of("0123456789") == s.npos;
    };
    if (!is_number(digits, 9) || (dot != std::string::npos && !is_number(suffix, 20))) continue;
    out.push_back({static_cast<uint32_t>(std::stoul(digits)), "/dev/shm/" + name});
  }
  closedir(dir);
  return out;
}

namespace {

struct flock byte_range(short type, int byte) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = byte;
  fl.l_len = 1;
  return fl;
}

}  // namespace

bool lock_segment_byte(int fd, int byte) {
  struct flock fl = byte_range(F_WRLCK, byte);
  return fcntl(fd, F_OFD_SETLK, &fl) == 0;
}

void unlock_segment_byte(int fd, int byte) {
  struct flock fl = byte_range(F_UNLCK, byte);
  fcntl(fd, F_OFD_SETLK, &fl);
}

bool segment_byte_locked(int fd, int byte) {
  struct flock fl = byte_range(F_WRLCK, byte);
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return false;
  return fl.l_type != F_UNLCK;
}

void futex_wake_all(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait(uint32_t* word, uint32_t expected, long timeout_ns) {
  timespec ts{timeout_ns / 1000000000, timeout_ns % 1000000000};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

}  // namespace nanotrace::sys
