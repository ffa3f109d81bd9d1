// What the kernel tests share: where the programs are, the skip when kernel tracing is not
// possible here, our recorders' tracefs instances, polling with a deadline, a traced
// workload doing I/O on a loop device, and the chunks of a trace file, to damage them.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
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
#include "nanotrace/abi.hpp"

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

// Whether a tracefs instance of the recorder with this pid has events enabled: its capture
// is on.
inline bool capture_on(pid_t recorder) {
  for (const std::string& name : instances_of(recorder)) {
    std::ifstream e(std::string(kInstances) + "/" + name + "/events/enable");
    std::string v;
    if (e >> v && v != "0") return true;
  }
  return false;
}

// Whether the process has exited (a zombie not reaped yet) or is gone.
inline bool exited(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t end = line.rfind(')');
  return end == std::string::npos || line.compare(end + 1, 2, " Z") == 0;
}

// iograph running dependent 4 KiB reads on a loop device, traced, its rings in block mode (a
// recording loses nothing) or in another NANOTRACE_MODE. Either until killed (graphs 0), or
// a fixed number of graphs of 128 reads that record() captures whole: the same amount of
// I/O, and of events to check, whatever the machine's speed.
// Whether the segment at path has a complete header: its writer sets the version last, and a
// recorder started before that would find "bad magic".
inline bool segment_complete(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  abi::SegmentHeader h{};
  const bool whole = ::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h));
  ::close(fd);
  return whole && h.version != 0;
}

class LoopWorkload {
 public:
  explicit LoopWorkload(const std::string& mode = "block", int graphs = 0) {
    const std::string repeat = std::to_string(graphs > 0 ? graphs : 1000000);
    proc_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{kBin + "/iograph", "bench", "--target", "loop", "--shapes", "rope",
                                 "--size", "128", "--repeat", repeat, "--warmup", "0", "--backends",
                                 "uring-ready", "--trace"},
        std::vector<std::string>{"NANOTRACE_MODE=" + mode, "NANOTRACE_BUFFER=4M"});
    pid_ = proc_->pid();
    const std::string segment = testing::segment_of(pid_);
    if (graphs == 0) {
      ready_ = wait_for([&] { return segment_complete(segment); }, 60);
      return;
    }
    // Stopped as soon as it is traced (a few graphs may have run: they are not all in the
    // recording), until record() has the kernel's capture on.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!ready_ && std::chrono::steady_clock::now() < deadline) {
      ready_ = segment_complete(segment);
      if (!ready_) std::this_thread::yield();
    }
    if (ready_) ::kill(pid_, SIGSTOP);
  }
  ~LoopWorkload() {
    proc_.reset();  // SIGKILL; the loop device clears itself on the last close
    for (const std::string& s : testing::segments_of(pid_)) ::unlink(s.c_str());
  }
  bool ready() const { return ready_; }
  std::string pid() const { return std::to_string(proc_->pid()); }

  // Records a counted workload to its end: `nanotrace record PID ARGS -o FILE`, the workload
  // resumed once the recorder's kernel capture is on. Returns what the recorder printed
  // (stdout and stderr); *code is its exit code (-1 if it did not exit).
  std::string record(const std::string& args, const std::string& file, int* code) {
    testing::ChildProcess rec(
        {"/bin/sh", "-c",
         "exec " + kCli + " record " + pid() + " " + args + " -o " + file + " 2>&1"},
        {});
    wait_for([&] { return capture_on(rec.pid()) || exited(rec.pid()); }, 60);
    ::kill(pid_, SIGCONT);
    std::string out;
    for (std::string line = rec.read_line(); !line.empty(); line = rec.read_line()) {
      out += line + "\n";
    }
    const int status = rec.wait();
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
  }

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
