// Where a CTF export writes: the output directory, emptied of what an earlier export wrote in
// it, and, when the export is one CTF trace per process, each process's subdirectory (under
// its node's in a merged trace). Created on first use, so an export that finds no records
// creates nothing. Safe to use from the export's worker threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::exporter::ctf {

class OutputDirectories {
 public:
  // out: the directory the user named. per_process: one subdirectory per process.
  OutputDirectories(const Trace& trace, std::string out, bool per_process);

  // The output directory, created (mode 0700) or emptied of an earlier export's files and
  // subdirectories. A path that exists and is not a directory (a symbolic link too) is refused.
  Status ensure_top();
  // The directory of process `process`'s streams and metadata, created on first use: the top
  // directory unless the export is per process.
  Result<std::string> for_process(uint32_t process);

  // After ensure_top() succeeded: the output directory.
  const std::string& top() const { return top_; }
  // Process `process`'s subdirectory, "" if none was made (it wrote no stream).
  const std::string& made_for(uint32_t process) const { return process_dirs_[process]; }

 private:
  Status remove_old_subdirectories(const std::string& parent, bool nodes);

  const Trace& trace_;
  const std::string out_;
  const bool per_process_;
  std::mutex mu_;
  bool tried_ = false;
  Status status_;
  std::string top_;
  std::vector<std::string> process_dirs_;  // by process: "" until its first stream
};

}  // namespace nanotrace::exporter::ctf
