// Safe creation of output files (see output_file.hpp).
#include "base/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace nanotrace {
namespace {

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

bool is_stream(mode_t mode) { return S_ISFIFO(mode) || S_ISCHR(mode); }

}  // namespace

Status check_not_source(const std::string& path, int source_fd) {
  if (source_fd < 0) return Status::Ok();
  struct stat source, out;
  if (fstat(source_fd, &source) != 0) return Status::FromErrno("fstat of the source", errno);
  bool same = (stat(path.c_str(), &out) == 0 && same_file(source, out)) ||
              (lstat(path.c_str(), &out) == 0 && same_file(source, out));
  if (same) {
    return Status::Invalid("output " + path +
                           " is the source being read (the same file); write to another path");
  }
  return Status::Ok();
}

Result<int> create_output_file(const std::string& path, int source_fd) {
  if (path.empty()) return Status::Invalid("empty output path");
  Status st = check_not_source(path, source_fd);
  if (!st.ok()) return st;
  struct stat link;
  if (lstat(path.c_str(), &link) == 0) {
    struct stat target = link;
    if (S_ISLNK(link.st_mode) && stat(path.c_str(), &target) != 0) target = link;  // dangling
    if (is_stream(target.st_mode)) {
      // A pipe or a terminal-like device: written as a stream, nothing is replaced.
      int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return Status::FromErrno("cannot open " + path, errno);
      return fd;
    }
    if (S_ISDIR(link.st_mode)) return Status::Invalid("cannot write " + path + ": a directory");
    if (!S_ISREG(link.st_mode) && !S_ISLNK(link.st_mode)) {
      return Status::Invalid("cannot write " + path +
                             ": not a regular file, FIFO or character "
                             "device");
    }
    // Replaced, not truncated: a symlink's target is never written, and the new file's
    // mode is 0600 whatever the old one's was.
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno("cannot replace " + path, errno);
    }
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      return Status::IoError("cannot create " + path + ": something else created it meanwhile");
    }
    return Status::FromErrno("cannot create " + path, errno);
  }
  if (fchmod(fd, 0600) != 0) {  // the umask may have taken bits away
    int err = errno;
    ::close(fd);
    return Status::FromErrno("cannot set the mode of " + path, err);
  }
  return fd;
}

}  // namespace nanotrace
