// Validation of a segment header copy before any offset in it is used, and the wait for a
// segment being created. Internal header.
#pragma once

#include <sys/stat.h>

#include <cstdint>

#include "base/process.hpp"
#include "nanotrace/abi.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::reader {

// Checks magic, version, sizes, and that every table and ring lies inside file_size.
// tables_only: a table region copied into a trace file (META chunk): the segment size,
// thread table and rings are not checked.
Status validate_header(const abi::SegmentHeader& header, uint64_t file_size,
                       bool tables_only = false);

// A segment's creator takes the writer lock of the new file, sizes it, then writes its header,
// the version last. A reader that opens it in between (a recorder started right after its
// process) waits for that while the lock is held, a second at most; a file nobody holds is
// judged at once as it is.
// Returns false only if fstat fails (errno set); *st is the file as last seen.
bool wait_while_created(int fd, struct stat* st);

using sys::futex_wake_all;
using sys::process_alive;

}  // namespace nanotrace::reader
