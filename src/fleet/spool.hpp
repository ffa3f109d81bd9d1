// The agent's spool directory: the one place it writes. Every file it creates there is new
// (never an existing file, never through a symbolic link) and mode 0600, and every name a
// broker message brings is checked to be a plain file name inside it: a name with a slash, a
// leading dot or any character outside [A-Za-z0-9._-] is refused, so that no message can make
// the agent read or write anywhere else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

// True if name is a file name the spool accepts (see above).
bool valid_spool_name(const std::string& name);
// Makes any text a valid part of a spool name (other characters become '_').
std::string spool_safe(const std::string& text);

class Spool {
 public:
  // Opens (creating it 0700 if missing) the directory. Errors: kIoError; kInvalidArgument if
  // it is a symbolic link or not a directory.
  static Result<Spool> open(const std::string& dir);
  Spool(Spool&& other) noexcept;
  Spool& operator=(Spool&& other) noexcept;
  ~Spool();

  const std::string& dir() const { return dir_; }
  // The path of a new file in the spool. Errors: kInvalidArgument (a bad name, or the file exists).
  Result<std::string> new_path(const std::string& name) const;
  // Writes a new file (0600). Errors as new_path, kIoError.
  Status write_file(const std::string& name, const std::string& bytes) const;
  // Writes a file (0600) in place of the one of that name, atomically (a new file renamed).
  Status replace_file(const std::string& name, const std::string& bytes) const;
  // Reads up to max bytes at offset of a file in the spool (never through a link).
  // Errors: kInvalidArgument (a bad name), kNotFound, kIoError.
  Result<std::string> read(const std::string& name, uint64_t offset, uint64_t max) const;
  Result<uint64_t> size(const std::string& name) const;
  // Removes a file of the spool (a bad name is refused).
  Status remove(const std::string& name) const;
  // Names of the files ending in suffix.
  std::vector<std::string> list(const std::string& suffix) const;

 private:
  Spool(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
  std::string dir_;
  int fd_ = -1;
};

}  // namespace nanotrace::fleet
