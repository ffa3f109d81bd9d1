// Reads /proc/self/stat through a descriptor the program may have closed behind our back
// (see self_stat.hpp): identity first, then content that starts with our pid.
#include "runtime/self_stat.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace nanotrace::runtime {

bool SelfStat::still_ours() const {
  struct stat st;
  return fd_ >= 0 && fstat(fd_, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

bool SelfStat::open_fresh() {
  fd_ = -1;  // a number found taken is the program's now: not ours to close
  const int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0) return false;  // not closed either: it may no longer be ours
  pid_ = getpid();
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  fd_ = fd;
  return true;
}

bool SelfStat::read(Reading* out) {
  if (pid_ != getpid()) close_if_ours();  // a fork child's copy names the parent's file
  if (!still_ours() && !open_fresh()) return false;
  char buf[1024];
  const ssize_t n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  // Between the identity check and the read the program could still have swapped the file:
  // what was read must be our own line.
  char pid_text[16];
  const auto [end, ec] = std::to_chars(pid_text, pid_text + sizeof(pid_text), pid_);
  const size_t pid_len = static_cast<size_t>(end - pid_text);
  if (ec != std::errc() || std::strncmp(buf, pid_text, pid_len) != 0 ||
      std::strncmp(buf + pid_len, " (", 2) != 0) {
    fd_ = -1;
    return false;
  }
  const char* p = std::strrchr(buf, ')');  // the name may hold spaces and parentheses
  if (p == nullptr || p[1] != ' ' || p[2] == '\0') return false;
  out->main_state = p[2];
  for (int field = 2; p != nullptr && field < 20; ++field) p = std::strchr(p + 1, ' ');
  if (p == nullptr) return false;
  out->threads = std::atoi(p + 1);
  return out->threads > 0;
}

bool SelfStat::only_caller_left(const Reading& r) {
  return r.threads == 1 || (r.threads == 2 && (r.main_state == 'Z' || r.main_state == 'X'));
}

void SelfStat::close_if_ours() {
  if (still_ours()) ::close(fd_);
  fd_ = -1;
}

}  // namespace nanotrace::runtime
