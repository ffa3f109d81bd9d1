// What the kernel tests share: where the programs are, the skip when kernel tracing is not
// possible here, our recorders' tracefs instances, polling with a deadline, a traced
// workload doing I/O on a loop device, and the chunks of a trace file, to damage them.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/file_format.hpp"
#include "common/child_process.hpp"
#include "common/prerequisite.hpp"

namespace nanotrace::kernel_test {

inline const std::string kBin = NANOTRACE_BIN_DIR;
inline const std::string kCli = kBin + "/nanotrace";
inline constexpr char kInstances[] = "/sys/kernel/tracing/instances";

// Skipped without root, a loop driver or tracefs; on CI as root, a failure
// (common/prerequisite.hpp).
#define SKIP_WITHOUT_KERNEL_TRACING()                                                   \
  do {                                                                                  \
    NANOTRACE_REQUIRE(::geteuid() == 0, "kernel tracing needs root");                   \
    NANOTRACE_REQUIRE(::access("/dev/loop-control", F_OK) == 0, "no loop driver");      \
    NANOTRACE_REQUIRE(                                                                  \
        ::access("/sys/kernel/tracing/instances", F_OK) == 0 ||                         \
            std::system("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null") == 0, \
        "no tracefs");                                                                  \
  } while (0)

// Instances a recorder with this pid created (nanotrace-<pid>-<start time>).
inline std::vector<std::string> instances_of(pid_t pid) {
  std::vector<std::string> out;
  DIR* d = opendir(kInstances);
  if (!d) return out;
  const std::string prefix = "nanotrace-" + std::to_string(pid) + "-";
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

// True once the recorder with this pid has enabled `event` ("system/event") in its instance:
// the kernel capture is on.
inline bool capture_enabled(pid_t recorder, const std::string& event) {
  for (const std::string& name : instances_of(recorder)) {
    std::ifstream e(std::string(kInstances) + "/" + name + "/events/" + event + "/enable");
    std::string v;
    if (e >> v && v == "1") return true;
  }
  return false;
}

inline bool wait_for(const std::function<bool()>& done, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

inline std::string temp_file(const char* name) {
  return "/tmp/nanotrace-kernel-test-" + std::to_string(getpid()) + "-" + name + ".ntr";
}

// iograph running dependent 4 KiB reads on a loop device, traced, until killed; its rings in
// block mode (a recording loses nothing) or in another NANOTRACE_MODE.
class LoopWorkload {
 public:
  explicit LoopWorkload(const std::string& mode = "block") {
    proc_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{kBin + "/iograph", "bench", "--target", "loop", "--shapes", "rope",
                                 "--size", "128", "--repeat", "1000000", "--warmup", "0",
                                 "--backends", "uring-ready", "--trace"},
        std::vector<std::string>{"NANOTRACE_MODE=" + mode, "NANOTRACE_BUFFER=4M"});
    pid_ = proc_->pid();
    ready_ = wait_for(
        [&] { return ::access(testing::segment_of(proc_->pid()).c_str(), F_OK) == 0; }, 60);
  }
  ~LoopWorkload() {
    proc_.reset();  // SIGKILL; the loop device clears itself on the last close
    for (const std::string& s : testing::segments_of(pid_)) ::unlink(s.c_str());
  }
  bool ready() const { return ready_; }
  std::string pid() const { return std::to_string(proc_->pid()); }

 private:
  std::unique_ptr<testing::ChildProcess> proc_;
  pid_t pid_ = 0;
  bool ready_ = false;
};
// The file's chunks: (offset of the header, header).
inline std::vector<std::pair<size_t, file::ChunkHeader>> chunks_of(const std::string& bytes) {
  std::vector<std::pair<size_t, file::ChunkHeader>> out;
  size_t off = sizeof(file::FileHeader);
  while (off + sizeof(file::ChunkHeader) <= bytes.size()) {
    file::ChunkHeader c;
    std::memcpy(&c, bytes.data() + off, sizeof(c));
    out.push_back({off, c});
    off += sizeof(c) + c.stored_size;
  }
  return out;
}

// Rewrites a chunk's payload in place and fixes both checksums, so that only the reader's
// own checks stand between the bytes and a crash.
inline void forge(std::string& bytes, size_t off, const std::string& payload) {
  file::ChunkHeader c;
  std::memcpy(&c, bytes.data() + off, sizeof(c));
  ASSERT_EQ(payload.size(), c.stored_size);
  ASSERT_EQ(c.flags, 0);
  std::memcpy(bytes.data() + off + sizeof(c), payload.data(), payload.size());
  c.payload_crc = file::crc32c(0, payload.data(), payload.size());
  c.header_crc = file::crc32c(0, &c, offsetof(file::ChunkHeader, header_crc));
  std::memcpy(bytes.data() + off, &c, sizeof(c));
}

}  // namespace nanotrace::kernel_test
