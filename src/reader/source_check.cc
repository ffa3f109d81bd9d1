// Checking a SOURCE path before it is opened (see source_check.hpp), and the source's
// descriptor for the outputs' same-file check.
#include "reader/source_check.hpp"

#include <sys/stat.h>

#include <cerrno>

#include "nanotrace/reader.hpp"
#include "reader/trace_file.hpp"

namespace nanotrace {
namespace reader {

Status check_source_path(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Status::Ok();  // open() says why
  if (S_ISREG(st.st_mode)) return Status::Ok();
  const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  return Status::Invalid(path + " is " + what + ", not a nanotrace segment or trace file");
}

}  // namespace reader

int Trace::source_fd() const { return file_ ? file_->fd : fd_; }

}  // namespace nanotrace
