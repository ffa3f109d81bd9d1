// File targets: a regular file or block device (file:PATH) and /dev/zero. O_DIRECT is tried
// first because buffered reads of a warm page cache complete inline and hide the
// scheduling behaviour the benchmarks are about.
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "targets_internal.hpp"

namespace iograph::internal {
namespace {

class FileTarget final : public Target {
 public:
  FileTarget(std::string path, int fd, bool direct, uint64_t size, bool is_zero)
      : path_(std::move(path)), fd_(fd), direct_(direct), size_(size), is_zero_(is_zero) {}
  ~FileTarget() override { ::close(fd_); }

  TargetKind kind() const override { return is_zero_ ? TargetKind::kZero : TargetKind::kFile; }
  std::string describe() const override {
    if (is_zero_) return "zero (/dev/zero)";
    return fmt::format("file:{} ({})", path_,
                       direct_ ? "O_DIRECT" : "buffered: the file system refused O_DIRECT");
  }
  int fd() const override { return fd_; }
  bool direct_io() const override { return direct_; }
  uint64_t size_bytes() const override { return size_; }

 private:
  std::string path_;
  int fd_;
  bool direct_;
  uint64_t size_;
  bool is_zero_;
};

// Opens read-write when allowed (write nodes need it), else read-only.
int open_with(const std::string& path, int extra) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | extra);
  if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | extra);
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<Target>> open_file_target(const std::string& path, bool is_zero) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("{}: no such file", path));
    return Status::FromErrno("stat " + path, errno);
  }
  if (S_ISDIR(st.st_mode)) return Status::Invalid(fmt::format("{} is a directory", path));
  bool direct = !is_zero;
  int fd = direct ? open_with(path, O_DIRECT) : -1;
  if (fd < 0) {
    if (direct && errno != EINVAL) return Status::FromErrno("open " + path, errno);
    direct = false;
    fd = open_with(path, 0);
    if (fd < 0) return Status::FromErrno("open " + path, errno);
  }
  uint64_t size = 0;
  if (S_ISREG(st.st_mode)) {
    size = static_cast<uint64_t>(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
      int err = errno;
      ::close(fd);
      return Status::FromErrno("BLKGETSIZE64 " + path, err);
    }
  }
  return std::unique_ptr<Target>(new FileTarget(path, fd, direct, size, is_zero));
}

}  // namespace iograph::internal
