// Status helpers that need the C library.
#include "nanotrace/status.hpp"

#include <cstring>

namespace nanotrace {

Status Status::FromErrno(const std::string& what, int err) {
  return Status(StatusCode::kIoError, what + ": " + std::strerror(err));
}

}  // namespace nanotrace
