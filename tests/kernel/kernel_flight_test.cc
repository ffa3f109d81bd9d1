// Kernel events in the snapshots of a flight recording, against the real kernel (root,
// tracefs): `record --snapshot-on EXPR --kernel block,io_uring` on iograph's loop-device
// workload with its rings in overwrite mode. Each snapshot holds the kernel's last events
// from the oldest user-space record on, merged in time order with the user records, and the
// events ftrace overwrote in its deliberately small buffer counted lost; the second
// (-flight) instance goes when the recorder ends, and `clean` removes it after SIGKILL.
// `snapshot --kernel` is refused with the way to get kernel history.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/child_process.hpp"
#include "kernel/kernel_fixture.hpp"

namespace nanotrace {
namespace {

using nlohmann::json;
using testing::ChildProcess;
using testing::run_command;

using namespace kernel_test;  // NOLINT: the shared helpers

bool has_flight_instance(pid_t recorder) {
  for (const std::string& name : instances_of(recorder)) {
    if (name.size() > 7 && name.compare(name.size() - 7, 7, "-flight") == 0) return true;
  }
  return false;
}

TEST(KernelTest, FlightRecordingSnapshotsHoldTheKernelsLastWindow) {
  SKIP_WITHOUT_KERNEL_TRACING();
  LoopWorkload w("overwrite");
  ASSERT_TRUE(w.ready());
  const std::string file = temp_file("flight");
  // One snapshot a second at most (the recorder's limit), on the end of any graph; 64 KiB
  // per CPU holds far less than a second of this workload's kernel events.
  ChildProcess rec(
      {kCli, "record", w.pid(), "--kernel", "block,io_uring", "--snapshot-on", "iograph:graph_end",
       "--kernel-flight-buffer", "64", "--duration", "4", "-o", file},
      {});
  ASSERT_TRUE(wait_for([&] { return has_flight_instance(rec.pid()); }, 60));
  EXPECT_EQ(instances_of(rec.pid()).size(), 2u);
  const int status = rec.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(instances_of(rec.pid()).empty()) << "both instances go with the recorder";

  const std::string snap = file + ".snap2";  // the first one may predate much kernel activity
  ASSERT_EQ(::access(snap.c_str(), F_OK), 0) << "no second snapshot";
  int code = 0;
  std::string out = run_command(kCli + " dump --json " + snap, &code);
  ASSERT_EQ(code, 0) << out;
  uint64_t user = 0, issues = 0, uring = 0, last_ns = 0, oldest_user = UINT64_MAX;
  uint64_t last_user = 0, last_kernel = 0;
  bool sorted = true;
  std::vector<std::pair<uint64_t, uint32_t>> kernel;  // time, CPU
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    json r = json::parse(line);
    const uint64_t t = r["time_ns"];
    sorted = sorted && t >= last_ns;
    last_ns = t;
    if (!r.contains("kernel")) {
      ++user;
      oldest_user = std::min(oldest_user, t);
      last_user = std::max(last_user, t);
      continue;
    }
    kernel.push_back({t, r["cpu"].get<uint32_t>()});
    last_kernel = std::max(last_kernel, t);
    const std::string event = r["event"];
    if (event == "block:block_rq_issue") ++issues;
    if (event.rfind("io_uring:", 0) == 0) ++uring;
  }
  EXPECT_TRUE(sorted) << "kernel and user records merged in time order";
  ASSERT_GT(user, 0u);
  EXPECT_GT(issues, 0u);
  EXPECT_GT(uring, 0u);
  // The kernel events are the last ones: read after the rings, they reach past the newest
  // user record (each I/O the workload submits has kernel events after it)...
  EXPECT_GE(last_kernel, last_user);
  // ...and go back no further than the oldest user record, but for the rest of the
  // sub-buffer (4 KiB, events of 16 bytes and more) in which it falls, per CPU.
  std::map<uint32_t, uint64_t> older;
  for (const auto& [t, cpu] : kernel) {
    if (t < oldest_user) ++older[cpu];
  }
  for (const auto& [cpu, n] : older) EXPECT_LE(n, 4096u / 16) << "cpu " << cpu;

  // The snapshot counts what ftrace overwrote as lost, per CPU, beside the user losses.
  out = run_command(kCli + " stats --json " + snap, &code);
  ASSERT_EQ(code, 0) << out;
  json st = json::parse(out);
  uint64_t overwritten = 0, cpus = 0;
  for (const json& t : st["threads"]) {
    if (t["tid"] == 0 && t["name"].get<std::string>().rfind("cpu", 0) == 0) {
      ++cpus;
      overwritten += t["overwritten"].get<uint64_t>();
    }
  }
  EXPECT_GT(cpus, 0u);
  EXPECT_GT(overwritten, 0u) << "64 KiB per CPU cannot hold a second of this workload";

  // The recording itself still has every kernel event, none lost.
  out = run_command(kCli + " stats --json " + file, &code);
  ASSERT_EQ(code, 0) << out;
  for (int i = 1; ::access((file + ".snap" + std::to_string(i)).c_str(), F_OK) == 0; ++i) {
    ::unlink((file + ".snap" + std::to_string(i)).c_str());
  }
  ::unlink(file.c_str());
}

TEST(KernelTest, CleanRemovesTheFlightInstanceOfAKilledRecorder) {
  SKIP_WITHOUT_KERNEL_TRACING();
  LoopWorkload w("overwrite");
  ASSERT_TRUE(w.ready());
  const std::string file = temp_file("flight-killed");
  ChildProcess rec({kCli, "record", w.pid(), "--kernel", "block", "--snapshot-on",
                    "iograph:graph_end", "-o", file},
                   {});
  ASSERT_TRUE(wait_for([&] { return has_flight_instance(rec.pid()); }, 60));
  kill(rec.pid(), SIGKILL);
  rec.wait();
  std::vector<std::string> left = instances_of(rec.pid());
  ASSERT_EQ(left.size(), 2u) << "SIGKILL leaves both instances for clean";
  int code = 0;
  std::string out = run_command(kCli + " clean", &code);
  EXPECT_EQ(code, 0) << out;
  for (const std::string& name : left) {
    EXPECT_NE(out.find("removed tracefs instance " + name), std::string::npos) << out;
  }
  EXPECT_TRUE(instances_of(rec.pid()).empty());
  for (int i = 1; ::access((file + ".snap" + std::to_string(i)).c_str(), F_OK) == 0; ++i) {
    ::unlink((file + ".snap" + std::to_string(i)).c_str());
  }
  ::unlink(file.c_str());
}

TEST(KernelTest, OneShotSnapshotRefusesKernelAndSaysWhatKeepsHistory) {
  SKIP_WITHOUT_KERNEL_TRACING();
  LoopWorkload w("overwrite");
  ASSERT_TRUE(w.ready());
  const std::string file = temp_file("oneshot");
  int code = 0;
  std::string out =
      run_command(kCli + " snapshot " + w.pid() + " --kernel block -o " + file + " 2>&1", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_EQ(out.rfind("nanotrace: ", 0), 0u) << out;
  EXPECT_NE(out.find("--snapshot-on"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(::access(file.c_str(), F_OK), 0) << "nothing written";
}

}  // namespace
}  // namespace nanotrace
