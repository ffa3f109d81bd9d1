// Post-mortem evidence survives pid reuse: when a new traced process gets the pid of a
// crashed one whose segment is still in /dev/shm, the old segment is set aside as
// nanotrace-<pid>.<start time> instead of being replaced, and `list`, `recover` and `clean`
// handle it. The reuse is made exact with clone3(set_tid), which needs root (CI runs as
// root).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/child_process.hpp"
#include "../common/prerequisite.hpp"
#include "base/process.hpp"
#include "nanotrace/abi.hpp"
#include "nanotrace/reader.hpp"

namespace {

using nanotrace::testing::run_command;
using nanotrace::testing::segment_of;
using ::testing::HasSubstr;

const std::string kCli = std::string(NANOTRACE_BIN_DIR) + "/nanotrace";
const std::string kProducer = std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer";

// Runs the producer as a child with exactly this pid; returns its wait status, -errno if the
// pid could not be had.
int run_producer_with_pid(pid_t pid, const char* events) {
  pid_t tid = pid;
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&tid);
  args.set_tid_size = 1;
  long child = syscall(SYS_clone3, &args, sizeof(args));
  if (child < 0) return -errno;
  if (child == 0) {
    setenv("NANOTRACE_KEEP", "0", 1);
    execl(kProducer.c_str(), kProducer.c_str(), "--threads", "1", "--events", events, nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(static_cast<pid_t>(child), &status, 0);
  return status;
}

struct Crashed {
  pid_t pid;
  std::string old_path;  // the segment it left
  std::string aside;     // where a new process with its pid is to set it aside
};

// Starts a traced producer and kills it once it has recorded 1000 events.
Crashed crash_a_producer() {
  // SIGKILL: under ASan a SIGSEGV would be caught and turned into an exit.
  nanotrace::testing::ChildProcess crashed(
      {kProducer, "--threads", "1", "--events", "1000", "--hold"}, {"NANOTRACE_MODE=discard"});
  pid_t pid = crashed.pid();
  std::string line;
  while (!(line = crashed.read_line()).empty() && line != "ready") {
  }
  EXPECT_EQ(line, "ready");
  kill(pid, SIGKILL);
  int status = crashed.wait();
  EXPECT_TRUE(WIFSIGNALED(status)) << status;
  std::string old_path = segment_of(pid);
  nanotrace::abi::SegmentHeader header{};
  if (FILE* f = std::fopen(old_path.c_str(), "rb")) {
    EXPECT_EQ(std::fread(&header, sizeof(header), 1, f), 1u);
    std::fclose(f);
  }
  EXPECT_NE(header.proc_start_time, 0u) << old_path;
  return {pid, old_path, old_path + "." + std::to_string(header.proc_start_time)};
}

// Segments of pid that `nanotrace list --json` reports as a dead process's, by path.
std::vector<nlohmann::json> dead_segments_of(pid_t pid) {
  int code = 0;
  auto list = nlohmann::json::parse(run_command(kCli + " list --json", &code));
  EXPECT_EQ(code, 0);
  std::vector<nlohmann::json> out;
  for (const auto& e : list) {
    if (e["pid"] == pid && e["alive"] == false) out.push_back(e);
  }
  return out;
}

// A child that waits to be killed, with exactly this pid when pid is non-zero; -errno if it
// could not be started.
pid_t start_sleeper(pid_t pid) {
  pid_t tid = pid;
  clone_args args{};
  args.exit_signal = SIGCHLD;
  if (pid != 0) {
    args.set_tid = reinterpret_cast<uint64_t>(&tid);
    args.set_tid_size = 1;
  }
  long child = syscall(SYS_clone3, &args, sizeof(args));
  if (child < 0) return -errno;
  if (child == 0) {
    for (;;) pause();
  }
  return static_cast<pid_t>(child);
}

void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

// A process that took a dead one's pid, in the same clock tick or not, is not the dead one:
// what the recorder's watch on its target and `clean` ask.
TEST(PidReuseTest, LivenessTellsTheNewProcessWithTheOldPidApart) {
  const pid_t pid = start_sleeper(0);
  ASSERT_GT(pid, 0);
  const uint64_t old_start = nanotrace::sys::proc_start_time(static_cast<uint32_t>(pid));
  const uint64_t old_identity = nanotrace::sys::process_identity(static_cast<uint32_t>(pid));
  ASSERT_NE(old_identity, 0u) << "this kernel has no pidfs (Linux 6.9 or later)";
  EXPECT_TRUE(nanotrace::sys::process_alive(static_cast<uint32_t>(pid), old_start, old_identity));
  kill_and_reap(pid);
  EXPECT_FALSE(nanotrace::sys::process_alive(static_cast<uint32_t>(pid), old_start, old_identity));
  const pid_t again = start_sleeper(pid);
  ASSERT_EQ(again, pid) << "could not have pid " << pid << " again: " << std::strerror(-again);
  const uint64_t new_identity = nanotrace::sys::process_identity(static_cast<uint32_t>(pid));
  EXPECT_NE(new_identity, old_identity);
  EXPECT_FALSE(nanotrace::sys::process_alive(static_cast<uint32_t>(pid), old_start, old_identity));
  EXPECT_TRUE(nanotrace::sys::process_alive(static_cast<uint32_t>(pid), 0, new_identity));
  kill_and_reap(pid);
}

TEST(PidReuseTest, CrashedSegmentIsSetAsideThenListedRecoveredAndCleaned) {
  NANOTRACE_REQUIRE(geteuid() == 0, "choosing a child's pid (clone3 set_tid) needs root");
  // 1. A traced process is killed and leaves its segment. The new process below may start
  // within the same clock tick as this one (about one run in 60 here), where a start time
  // alone would take the segment for its own earlier image (exec) and remove it.
  auto [pid, old_path, aside] = crash_a_producer();
  ASSERT_FALSE(HasFailure());

  // 2. A new traced process gets the same pid, runs and exits cleanly.
  int status = run_producer_with_pid(pid, "10");
  ASSERT_GE(status, 0) << "clone3(set_tid=" << pid << "): " << std::strerror(-status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(std::filesystem::exists(old_path)) << "the new process removes its own segment";
  ASSERT_TRUE(std::filesystem::exists(aside)) << "the crashed process's segment was lost";

  // 3. It is still the crashed process's trace, listed as dead, and recoverable.
  int code = 0;
  auto list = nlohmann::json::parse(run_command(kCli + " list --json", &code));
  ASSERT_EQ(code, 0);
  bool listed = false;
  for (const auto& e : list) {
    if (e["path"] == aside) {
      listed = true;
      EXPECT_EQ(e["pid"], pid);
      EXPECT_EQ(e["alive"], false);
      EXPECT_EQ(e["events"], 1000);
    }
  }
  EXPECT_TRUE(listed) << list.dump();
  EXPECT_THAT(run_command(kCli + " list", &code), HasSubstr(aside));
  std::string file = "/tmp/nanotrace-pid-reuse-" + std::to_string(getpid()) + ".ntr";
  std::string out = run_command(kCli + " recover " + aside + " -o " + file + " 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  auto recovered = nanotrace::Trace::open(file);
  ASSERT_TRUE(recovered.ok()) << recovered.status().message();
  auto source = (*recovered)->read_all();
  nanotrace::Record record;
  uint64_t records = 0;
  while (source->next(&record)) ++records;
  EXPECT_EQ(records, 1000u);
  std::filesystem::remove(file);

  // 4. `clean` removes it: its process is gone.
  out = run_command(kCli + " clean 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_FALSE(std::filesystem::exists(aside)) << out;
}

// A file already under the set-aside name is never replaced: the crashed segment goes to
// another name, and both survive.
TEST(PidReuseTest, SettingAsideNeverReplacesAFile) {
  NANOTRACE_REQUIRE(geteuid() == 0, "choosing a child's pid (clone3 set_tid) needs root");
  auto [pid, old_path, aside] = crash_a_producer();
  ASSERT_FALSE(HasFailure());
  {
    FILE* f = std::fopen(aside.c_str(), "wx");
    ASSERT_NE(f, nullptr) << aside << ": " << std::strerror(errno);
    std::fputs("someone else's file\n", f);
    std::fclose(f);
  }

  int status = run_producer_with_pid(pid, "10");
  ASSERT_GE(status, 0) << "clone3(set_tid=" << pid << "): " << std::strerror(-status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(std::filesystem::exists(old_path)) << "the new process removes its own segment";
  std::string content;
  if (FILE* f = std::fopen(aside.c_str(), "r")) {
    char buf[64] = {};
    content.assign(buf, std::fread(buf, 1, sizeof(buf) - 1, f));
    std::fclose(f);
  }
  EXPECT_EQ(content, "someone else's file\n") << "the file under the set-aside name was replaced";
  std::filesystem::remove(aside);

  auto dead = dead_segments_of(pid);
  ASSERT_EQ(dead.size(), 1u) << "the crashed process's segment is listed once";
  EXPECT_EQ(dead[0]["events"], 1000);
  std::string moved = dead[0]["path"];
  EXPECT_NE(moved, aside);
  EXPECT_EQ(moved.rfind(old_path + ".", 0), 0u) << moved;
  std::filesystem::remove(moved);
}

}  // namespace
