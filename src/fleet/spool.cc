// The agent's spool directory (spool.hpp).
#include "fleet/spool.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nanotrace::fleet {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "another kind of file";
}

}  // namespace

bool valid_spool_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string spool_safe(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 64)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? "_" : out;
}

Result<Spool> Spool::open(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError("cannot create spool " + dir + ": " + std::strerror(errno));
  }
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return Status::Invalid("spool " + dir +
                           " is not a directory (or is a link): " + std::strerror(errno));
  }
  return Spool(dir, fd);
}

Spool::Spool(Spool&& other) noexcept : dir_(std::move(other.dir_)), fd_(other.fd_) {
  other.fd_ = -1;
}

Spool& Spool::operator=(Spool&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    dir_ = std::move(other.dir_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Spool::~Spool() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string> Spool::new_path(const std::string& name) const {
  if (!valid_spool_name(name))
    return Status::Invalid("refused: '" + name + "' is not a spool file name");
  struct stat st {};
  if (fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return Status::Invalid(name + " already exists in the spool");
  }
  return dir_ + "/" + name;
}

Status Spool::write_file(const std::string& name, const std::string& bytes) const {
  if (!valid_spool_name(name))
    return Status::Invalid("refused: '" + name + "' is not a spool file name");
  int fd = openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("cannot create " + name + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      ::close(fd);
      return Status::IoError("cannot write " + name + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return Status::IoError("cannot write " + name);
  return Status::Ok();
}

Status Spool::replace_file(const std::string& name, const std::string& bytes) const {
  if (!valid_spool_name(name))
    return Status::Invalid("refused: '" + name + "' is not a spool file name");
  std::string temp = "tmp-" + std::to_string(getpid()) + "-" + name;
  if (temp.size() > 200) temp = temp.substr(0, 200);
  unlinkat(fd_, temp.c_str(), 0);
  Status s = write_file(temp, bytes);
  if (!s.ok()) return s;
  if (renameat(fd_, temp.c_str(), fd_, name.c_str()) != 0) {
    unlinkat(fd_, temp.c_str(), 0);
    return Status::IoError("cannot replace " + name + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<std::string> Spool::read(const std::string& name, uint64_t offset, uint64_t max) const {
  if (!valid_spool_name(name))
    return Status::Invalid("refused: '" + name + "' is not a spool file name");
  // Non-blocking: a FIFO (or a device) someone put in the spool must not hold the agent's
  // fetches until a writer opens it; fstat then refuses anything but a regular file.
  int fd = openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no " + name + " in the spool");
    if (errno == ELOOP) return Status::Invalid("refused: " + name + " is a symbolic link");
    return Status::IoError("cannot open " + name + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Invalid("refused: " + name + " is not a regular file (" + file_kind(st.st_mode) +
                           ")");
  }
  std::string out(static_cast<size_t>(max), '\0');
  ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
  ::close(fd);
  if (n < 0) return Status::IoError("cannot read " + name);
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<uint64_t> Spool::size(const std::string& name) const {
  if (!valid_spool_name(name))
    return Status::Invalid("refused: '" + name + "' is not a spool file name");
  struct stat st {};
  if (fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
    return Status::NotFound("no " + name + " in the spool");
  }
  return static_cast<uint64_t>(st.st_size);
}

Status Spool::remove(const std::string& name) const {
  if (!valid_spool_name(name))
    return Status::Invalid("refused: '" + name + "' is not a spool file name");
  if (unlinkat(fd_, name.c_str(), 0) != 0) return Status::IoError("cannot remove " + name);
  return Status::Ok();
}

std::vector<std::string> Spool::list(const std::string& suffix) const {
  std::vector<std::string> names;
  int fd = openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return names;
  }
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (valid_spool_name(n) && n.size() >= suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(n);
    }
  }
  closedir(d);
  return names;
}

}  // namespace nanotrace::fleet
