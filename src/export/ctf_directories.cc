// The CTF export's output directories (ctf_directories.hpp). An earlier export's files are
// removed by name (metadata, stream-*) and its subdirectories only if that leaves them empty:
// other files in the directory are the user's and stay.
#include "export/ctf_directories.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "base/output_file.hpp"

namespace nanotrace::exporter::ctf {
namespace {

// `raw` reduced to characters that are safe in a path (at most `max` of them).
std::string path_safe(const std::string& raw, size_t max) {
  std::string name;
  for (char c : raw.substr(0, max)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    name += ok ? c : '_';
  }
  return name.empty() ? "unknown" : name;
}

// The subdirectory of process `index`: "process-INDEX-NAME-PID".
std::string process_directory_name(uint32_t index, const ProcessInfo& p) {
  return fmt::format("process-{}-{}-{}", index, path_safe(p.process_name, 32), p.pid);
}

// The directory of a node in an export of a merged trace: "node-INDEX-HOST".
std::string node_directory_name(const NodeInfo& node) {
  return fmt::format("node-{}-{}", node.index, path_safe(node.hostname, 64));
}

// Removes what an earlier export wrote in dir: its metadata and stream-* files.
Status remove_old_output(const std::string& dir, int source_fd) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name != "metadata" && name.rfind("stream-", 0) != 0) continue;
    Status st = check_not_source(entry.path().string(), source_fd);
    if (!st.ok()) return st;
    fs::remove(entry.path(), ec);
  }
  return Status::Ok();
}

}  // namespace

OutputDirectories::OutputDirectories(const Trace& trace, std::string out, bool per_process)
    : trace_(trace),
      out_(std::move(out)),
      per_process_(per_process),
      process_dirs_(trace.processes().size()) {}

Result<std::string> OutputDirectories::for_process(uint32_t process) {
  Status st = ensure_top();
  if (!st.ok()) return st;
  if (!per_process_) return top_;
  std::lock_guard<std::mutex> lock(mu_);
  if (!process_dirs_[process].empty()) return process_dirs_[process];
  const ProcessInfo& p = trace_.processes()[process];
  std::string parent = top_;
  if (trace_.nodes().size() > 1) {
    // A merged trace: each node's processes under its own directory.
    parent = top_ + "/" + node_directory_name(trace_.nodes()[p.node]);
    if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno("cannot create directory " + parent, errno);
    }
  }
  std::string sub = parent + "/" + process_directory_name(process, p);
  // Any old directory of that name was emptied and removed by ensure_top.
  if (::mkdir(sub.c_str(), 0700) != 0) {
    return Status::FromErrno("cannot create directory " + sub, errno);
  }
  process_dirs_[process] = sub;
  return sub;
}

// The process, kernel (and, at the top, node) subdirectories of an earlier export: emptied of
// what it wrote and removed (a symbolic link is not followed; a directory holding other files
// stays).
Status OutputDirectories::remove_old_subdirectories(const std::string& parent, bool nodes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    std::string name = entry.path().filename().string();
    const bool node = nodes && name.rfind("node-", 0) == 0;
    if ((name.rfind("process-", 0) != 0 && name != "kernel" && !node) || entry.is_symlink(ec) ||
        !entry.is_directory(ec)) {
      continue;
    }
    Status st = node ? remove_old_subdirectories(entry.path().string(), false)
                     : remove_old_output(entry.path().string(), trace_.source_fd());
    if (!st.ok()) return st;
    fs::remove(entry.path(), ec);  // only if empty
  }
  return Status::Ok();
}

Status OutputDirectories::ensure_top() {
  std::lock_guard<std::mutex> lock(mu_);
  if (tried_) return status_;
  tried_ = true;
  namespace fs = std::filesystem;
  struct stat st;
  if (lstat(out_.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    // A symlink is refused too: the old CTF files in a directory are removed, and a planted
    // link must not say which.
    status_ = Status::IoError("cannot write CTF to " + out_ + ": it exists and is not a " +
                              (S_ISLNK(st.st_mode) ? "directory (a symbolic link)" : "directory"));
    return status_;
  }
  std::error_code ec;
  if (fs::create_directories(out_, ec) && !ec) chmod(out_.c_str(), 0700);
  if (ec) {
    status_ = Status::IoError("cannot create directory " + out_ + ": " + ec.message());
    return status_;
  }
  status_ = remove_old_output(out_, trace_.source_fd());
  if (status_.ok()) status_ = remove_old_subdirectories(out_, /*nodes=*/true);
  if (status_.ok()) top_ = out_;
  return status_;
}

}  // namespace nanotrace::exporter::ctf
