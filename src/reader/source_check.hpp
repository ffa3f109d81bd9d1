// What a SOURCE path may be: a regular file (a segment or a trace file). A FIFO would block
// every open, a directory or device is no trace: they are refused before anything opens them.
#pragma once

#include <string>

#include "nanotrace/status.hpp"

namespace nanotrace::reader {

// Ok for a regular file or a path that does not exist (the caller reports "not found");
// kInvalidArgument naming what else the path is.
Status check_source_path(const std::string& path);

}  // namespace nanotrace::reader
