// Shared by the trace file tests: the CLI and producer paths, starting a producer and
// waiting for a recorder to attach, and checking per-thread sequence continuity.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

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

// Two producers that each lose records for want of a thread slot (discard mode: kLossyThreads
// threads that start together on 8 slots, kLossyEvents records each), then hold while
// `nanotrace record PID PID -o file` records both to their exit. Returns "" or what failed.
inline constexpr uint64_t kLossyThreads = 40, kLossyEvents = 2000;
inline std::string record_two_lossy_processes(const std::string& file) {
  const std::vector<std::string> args = {kProducer,
                                         "--threads",
                                         std::to_string(kLossyThreads),
                                         "--events",
                                         std::to_string(kLossyEvents),
                                         "--together",
                                         "--hold"};
  const std::vector<std::string> env = {"NANOTRACE_MODE=discard", "NANOTRACE_THREADS=8",
                                        "NANOTRACE_BUFFER=64K"};
  ChildProcess a(args, env), b(args, env);
  const pid_t pa = read_pid(a), pb = read_pid(b);
  if (pa <= 0 || pb <= 0 || a.read_line() != "ready" || b.read_line() != "ready") {
    return "the producers did not start";
  }
  ChildProcess recorder({"/bin/sh", "-c",
                         "exec " + kCli + " record " + std::to_string(pa) + " " +
                             std::to_string(pb) + " -o " + file + " 2>/dev/null"},
                        {});
  if (!wait_consumer(pa) || !wait_consumer(pb)) return "the recorder did not attach";
  a.close_stdin();
  b.close_stdin();
  const int sa = a.wait(), sb = b.wait(), status = recorder.wait();
  if (!WIFEXITED(sa) || WEXITSTATUS(sa) != 0 || !WIFEXITED(sb) || WEXITSTATUS(sb) != 0) {
    return "a producer failed";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "record failed: status " + std::to_string(status);
  }
  return "";
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
