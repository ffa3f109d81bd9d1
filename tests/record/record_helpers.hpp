// Shared by the trace file tests: the CLI and producer paths, starting a producer and
// waiting for a recorder to attach, and checking per-thread sequence continuity.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>

#include "common/child_process.hpp"
#include "common/records.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::testing {

inline const std::string kCli = std::string(NANOTRACE_BIN_DIR) + "/nanotrace";
inline const std::string kProducer = std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer";
inline const std::string kPacedProducer =
    std::string(NANOTRACE_BIN_DIR) + "/nanotrace_paced_producer";

inline pid_t read_pid(ChildProcess& child) {
  std::string line = child.read_line();
  return line.size() > 4 ? static_cast<pid_t>(std::stol(line.substr(4))) : -1;
}

inline std::string temp_path(const std::string& name) {
  return "/tmp/nanotrace-test-" + std::to_string(getpid()) + "-" + name;
}

// Waits until some process is attached as the segment's consumer (at most ~10 s).
inline bool wait_consumer(pid_t pid) {
  for (int i = 0; i < 2000; ++i) {
    auto t = Trace::open_pid(pid);
    if (t.ok() && (*t)->process().consumer_pid != 0) return true;
    usleep(5000);
  }
  return false;
}

struct Continuity {
  std::map<uint64_t, uint64_t> first, next;  // producer thread -> first seq, next expected seq
  uint64_t gaps = 0;
};

// Records of each producer thread must be contiguous (first seq may be > 0).
inline Continuity check_continuity(const ReadResult& r) {
  Continuity c;
  for (const TestRecord& t : r.records) {
    if (!c.next.count(t.thread)) {
      c.first[t.thread] = t.seq;
    } else if (c.next[t.thread] != t.seq) {
      ++c.gaps;
    }
    c.next[t.thread] = t.seq + 1;
  }
  return c;
}

inline std::unique_ptr<Trace> open_ok(const std::string& source) {
  auto t = Trace::open(source);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t.value()) : nullptr;
}

}  // namespace nanotrace::testing
