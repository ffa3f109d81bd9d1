// Broker credentials of the fleet: a token, or a user and a password, read from a file that
// only its owner may read (mode 0600 or stricter), so that they never appear on a command line
// or in the environment of a process anyone can inspect.
//
// The file holds `key = value` lines (`#` starts a comment): `token`, or `user` and
// `password`. Example:
//   user = nanotrace
//   password = s3cret
#pragma once

#include <string>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

struct Credentials {
  std::string token;
  std::string user;
  std::string password;
};

// Errors: kNotFound (no such file), kInvalidArgument (not a regular file, readable or writable
// by group or others, owned by another user than the caller, a malformed line, neither a
// token nor a user and password).
Result<Credentials> read_credentials(const std::string& path);

}  // namespace nanotrace::fleet
