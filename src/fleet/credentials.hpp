// Broker credentials of the fleet: a token, or a user and a password, read from a file that
// only its owner may read (mode 0600 or stricter), so that they never appear on a command line
// or in the environment of a process anyone can inspect.
//
// The file holds `key = value` lines: `token`, or `user` and `password`. A value is taken as
// written: everything after the `=` to the end of the line, blanks at its ends aside, `#`
// included (a password may hold any character). A value that must keep blanks at its ends is
// quoted: "..." (where \" and \\ stand for " and \) or '...' (nothing escaped). Blank lines and
// lines whose first character that is not a blank is `#` are comments; a comment never follows
// a value on its line. Example:
//   # the fleet's broker account
//   user = nanotrace
//   password = s3cret#with-a-hash
//   # password = "  blanks kept  "
#pragma once

#include <string>
#include <string_view>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

struct Credentials {
  std::string token;
  std::string user;
  std::string password;
};

// Errors: kNotFound (no such file), kInvalidArgument (not a regular file, readable or writable
// by group or others, owned by another user than the caller, or as parse_credentials).
Result<Credentials> read_credentials(const std::string& path);

// Parses a credentials file's text (`origin` names it in errors). Errors: kInvalidArgument: a
// line without `=`, an unknown or repeated key, a quote not closed or followed by more than
// blanks, a NUL byte, neither a token nor a user and a password. No error quotes a value.
Result<Credentials> parse_credentials(std::string_view text, const std::string& origin);

}  // namespace nanotrace::fleet
