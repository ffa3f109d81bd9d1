// fork() and exec() in traced programs: a traced non-main thread may fork and the child may
// leave through that thread; the child's records go to its own segment and the parent's stay
// intact. An exec leaves no live-looking or crashed-looking segment for the image it
// replaced, and a traced program exec'd in a fork child gets a clean segment of its own.
#include <glob.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/child_process.hpp"
#include "common/records.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;

const std::string kBin = NANOTRACE_BIN_DIR;
const std::string kCli = kBin + "/nanotrace";
const std::string kHelper = kBin + "/nanotrace_fork_helper";

struct SegmentCleanup {
  std::vector<pid_t> pids;
  ~SegmentCleanup() {
    for (pid_t pid : pids)
      for (const std::string& s : testing::segments_of(pid)) unlink(s.c_str());
  }
};

// "status PID WAITSTATUS" -> {pid, status}
std::pair<pid_t, int> parse_status(const std::string& line) {
  int pid = -1, status = -1;
  if (std::sscanf(line.c_str(), "status %d %d", &pid, &status) != 2) return {-1, -1};
  return {pid, status};
}

pid_t parse_prefixed_pid(const std::string& line, const char* prefix) {
  std::string p = prefix;
  return line.rfind(p, 0) == 0 ? static_cast<pid_t>(std::stol(line.substr(p.size()))) : -1;
}

// `nanotrace list --json` entries of one pid.
std::vector<nlohmann::json> listed(pid_t pid) {
  int code = 0;
  std::string out = testing::run_command(kCli + " list --json 2>/dev/null", &code);
  std::vector<nlohmann::json> entries;
  EXPECT_EQ(code, 0);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_array()) {
    ADD_FAILURE() << "list --json is not an array: " << out.substr(0, 200);
    return entries;
  }
  for (const auto& e : j)
    if (e.value("pid", 0u) == static_cast<uint32_t>(pid)) entries.push_back(e);
  return entries;
}

// The parent's own records: every thread's test:rec records contiguous and intact, none of
// the children's events among them.
void expect_parent_intact(pid_t parent) {
  auto trace = Trace::open_pid(parent);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE((*trace)->process().alive);
  EXPECT_EQ((*trace)->process().state, abi::ProcessState::kRunning);
  testing::ReadResult r = testing::read_test_records(**trace);
  EXPECT_EQ(r.bad_checksums, 0u);
  EXPECT_EQ(r.other_events, 0u) << "a child's records landed in the parent's segment";
  std::map<uint64_t, uint64_t> next;
  uint64_t gaps = 0;
  for (const auto& t : r.records) {
    auto it = next.find(t.thread);
    if (it != next.end() && it->second != t.seq) ++gaps;
    next[t.thread] = t.seq + 1;
  }
  EXPECT_EQ(gaps, 0u);
  EXPECT_EQ(next[100], 1000u);
  for (const ThreadStats& s : r.threads) EXPECT_EQ(s.corrupt_blocks, 0u);
}

TEST(ForkSafetyTest, ForkFromNonMainThreadThenExitFromIt) {
  const int kIterations = 10;
  ChildProcess helper({kHelper, "thread", std::to_string(kIterations)}, {"NANOTRACE_KEEP=1"});
  pid_t parent = parse_prefixed_pid(helper.read_line(), "pid ");
  ASSERT_GT(parent, 0);
  SegmentCleanup cleanup{{parent}};
  int exited_zero = 0;
  std::vector<pid_t> children;
  for (int i = 0; i < kIterations; ++i) {
    pid_t child = parse_prefixed_pid(helper.read_line(), "child ");
    ASSERT_GT(child, 0) << "iteration " << i;
    cleanup.pids.push_back(child);
    children.push_back(child);
    std::string line = helper.read_line();
    auto [pid, status] = parse_status(line);
    ASSERT_EQ(pid, child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child " << i << ": wait status " << status
        << (line.find("hung") != std::string::npos ? " (had not exited after 2 s)" : "")
        << (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")" : "");
    exited_zero += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  EXPECT_EQ(exited_zero, kIterations);
  ASSERT_EQ(helper.read_line(), "ready");
  // Each child's records are in its own segment (kept: NANOTRACE_KEEP=1).
  for (int i = 0; i < kIterations; ++i) {
    auto trace = Trace::open_pid(children[i]);
    if (!trace.ok()) {
      ADD_FAILURE() << "child " << i << " has no segment: " << trace.status().message();
      continue;
    }
    EXPECT_EQ((*trace)->process().pid, static_cast<uint32_t>(children[i]));
    EXPECT_NE((*trace)->process().state, abi::ProcessState::kCrashed);
    auto source = (*trace)->read_all();
    Record r;
    uint64_t own = 0, parents = 0;
    while (source->next(&r)) {
      if (r.event->full_name() == "test:child" && r.values[0].bits == static_cast<uint64_t>(i)) {
        ++own;
      } else if (r.event->full_name() == "test:rec") {
        ++parents;
      }
    }
    EXPECT_EQ(own, 50u) << "child " << i;
    // Only what the child wrote: the parent's rings are not copied into the child's.
    EXPECT_EQ(parents, 0u) << "child " << i;
  }
  expect_parent_intact(parent);
  helper.close_stdin();
  int status = helper.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

bool wait_for_comm(pid_t pid, const std::string& comm) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
    std::string c;
    if (std::getline(f, c) && c == comm) return true;
    usleep(5000);
  }
  return false;
}

// Nothing about `pid` looks like a live traced process or a crash.
void expect_not_live_nor_crashed(pid_t pid, const std::string& when) {
  for (const nlohmann::json& e : listed(pid)) {
    EXPECT_FALSE(e.value("alive", false)) << when << ": listed as live: " << e.dump();
  }
  for (const std::string& path : testing::segments_of(pid)) {
    auto t = Trace::open_path(path);
    if (!t.ok()) continue;
    EXPECT_NE((*t)->process().state, abi::ProcessState::kCrashed)
        << when << ": " << path << " is marked crashed";
  }
}

void exec_untraced(bool trace_first) {
  ChildProcess helper(
      trace_first ? std::vector<std::string>{kHelper, "exec", "--trace-first", "/bin/sleep", "1"}
                  : std::vector<std::string>{kHelper, "exec", "/bin/sleep", "1"},
      {});
  pid_t parent = parse_prefixed_pid(helper.read_line(), "pid ");
  ASSERT_GT(parent, 0);
  pid_t child = parse_prefixed_pid(helper.read_line(), "child ");
  ASSERT_GT(child, 0);
  SegmentCleanup cleanup{{parent, child}};
  ASSERT_TRUE(wait_for_comm(child, "sleep"));
  // While the untraced program runs.
  expect_not_live_nor_crashed(child, "during sleep");
  if (!trace_first) {
    // The child never wrote a record: it never had a segment.
    EXPECT_EQ(testing::segments_of(child), std::vector<std::string>{}) << "segment of a fork child "
                                                                          "that wrote nothing";
  }
  auto [pid, status] = parse_status(helper.read_line());
  ASSERT_EQ(pid, child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(helper.read_line(), "ready");
  expect_not_live_nor_crashed(child, "after sleep exited");
  int code = 0;
  std::string out = testing::run_command(kCli + " clean 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(testing::segments_of(child), std::vector<std::string>{}) << "left after clean";
  expect_parent_intact(parent);
  helper.close_stdin();
  status = helper.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(ForkSafetyTest, ExecOfUntracedProgramLeavesNothingLive) { exec_untraced(false); }

TEST(ForkSafetyTest, ExecOfUntracedProgramAfterAnEventLeavesNothingLive) { exec_untraced(true); }

void exec_traced(bool trace_first) {
  std::vector<std::string> argv = {kHelper, "exec"};
  if (trace_first) argv.push_back("--trace-first");
  argv.insert(argv.end(), {kBin + "/nanotrace_test_producer", "--events", "1000", "--hold"});
  ChildProcess helper(argv, {});
  pid_t parent = parse_prefixed_pid(helper.read_line(), "pid ");
  ASSERT_GT(parent, 0);
  pid_t child = parse_prefixed_pid(helper.read_line(), "child ");
  ASSERT_GT(child, 0);
  SegmentCleanup cleanup{{parent, child}};
  ASSERT_EQ(parse_prefixed_pid(helper.read_line(), "pid "), child);  // the producer
  ASSERT_EQ(helper.read_line(), "ready");
  // The exec'd program's segment is the only one of its pid, live, with its own records.
  EXPECT_EQ(testing::segments_of(child), std::vector<std::string>{testing::segment_of(child)});
  std::vector<nlohmann::json> entries = listed(child);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].value("alive", false));
  auto trace = Trace::open_pid(child);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ((*trace)->process().state, abi::ProcessState::kRunning);
  testing::ReadResult r = testing::read_test_records(**trace);
  EXPECT_EQ(r.records.size(), 1000u);
  EXPECT_EQ(r.bad_checksums, 0u);
  EXPECT_EQ(r.other_events, 0u);
  helper.close_stdin();
  auto [pid, status] = parse_status(helper.read_line());
  ASSERT_EQ(pid, child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(helper.read_line(), "ready");
  status = helper.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // A clean exit of the exec'd program removes its segment; nothing of the image before
  // the exec remains either.
  EXPECT_EQ(testing::segments_of(child), std::vector<std::string>{});
}

TEST(ForkSafetyTest, ExecOfTracedProgramGetsOneCleanSegment) { exec_traced(false); }

TEST(ForkSafetyTest, ExecOfTracedProgramAfterAnEventGetsOneCleanSegment) { exec_traced(true); }

}  // namespace
}  // namespace nanotrace
