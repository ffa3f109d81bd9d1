// Validation of a segment header copy before any offset in it is used. Internal header.
#pragma once

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

using sys::futex_wake_all;
using sys::process_alive;

}  // namespace nanotrace::reader
