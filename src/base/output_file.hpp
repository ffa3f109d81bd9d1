// Creating output files (trace files, exports, reports) safely: mode 0600 whatever the
// umask, never through a symlink planted at the path, and never onto the trace being read.
#pragma once

#include <string>

#include "nanotrace/status.hpp"

namespace nanotrace {

// Opens path for writing a new output and returns its descriptor. A regular file or a
// symlink at path is replaced by a new file (unlinked, then created with O_EXCL|O_NOFOLLOW,
// so neither the old file nor a symlink's target is written), mode 0600. A FIFO or a
// character device (or a symlink to one: /dev/stdout, /dev/fd/N) is opened as it is. A
// directory, block device or socket is refused.
// source_fd: the open source of the data (-1: none); an output that is the same file
// (same st_dev and st_ino, directly, through a symlink or a hard link) is refused.
Result<int> create_output_file(const std::string& path, int source_fd = -1);

// kInvalidArgument if path names the same file as source_fd, directly, through a symlink or
// through a hard link; Ok if it does not, or does not exist, or source_fd is -1.
Status check_not_source(const std::string& path, int source_fd);

}  // namespace nanotrace
