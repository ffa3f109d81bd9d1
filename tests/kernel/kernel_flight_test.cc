// Kernel events in the snapshots of a flight recording, against the real kernel (root,
// tracefs): `record --snapshot-on EXPR --kernel block,io_uring` on iograph's loop-device
// workload with its rings in overwrite mode. Each snapshot holds the kernel's last events
// from the oldest user-space record on, merged in time order with the user records, and the
// events ftrace overwrote in its deliberately small buffer counted lost; the second
// (-flight) instance goes when the recorder ends, and `clean` removes it after SIGKILL.
// The same with several processes (`record A B`: one snapshot of both) and with a command's
// process tree (`run --snapshot-on --kernel`). `snapshot --kernel` is refused with the way to
// get kernel history.
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
#include "nanotrace/reader.hpp"

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

// What a snapshot's `dump --json` holds: user records by pid, the kernel events of the
// window, and whether they all came in time order.
struct Window {
  std::map<uint32_t, uint64_t> user;  // by pid
  uint64_t issues = 0, uring = 0;
  bool sorted = true;
};

Window read_window(const std::string& snap) {
  Window w;
  int code = 0;
  std::istringstream lines(run_command(kCli + " dump --json " + snap, &code));
  EXPECT_EQ(code, 0);
  uint64_t last_ns = 0;
  for (std::string line; std::getline(lines, line);) {
    json r = json::parse(line);
    const uint64_t t = r["time_ns"];
    w.sorted = w.sorted && t >= last_ns;
    last_ns = t;
    if (!r.contains("kernel")) {
      ++w.user[r["pid"].get<uint32_t>()];
      continue;
    }
    const std::string event = r["event"];
    if (event == "block:block_rq_issue") ++w.issues;
    if (event.rfind("io_uring:", 0) == 0) ++w.uring;
  }
  return w;
}

// The highest graph number a live iograph has ended so far (its ring's graph_end records).
uint64_t last_graph(const std::string& pid) {
  int code = 0;
  std::istringstream lines(run_command(kCli + " dump --json -e iograph:graph_end " + pid, &code));
  uint64_t last = 0;
  for (std::string line; std::getline(lines, line);) {
    last = std::max(last, json::parse(line)["fields"]["graph"].get<uint64_t>());
  }
  return last;
}

void remove_recording(const std::string& file) {
  for (int i = 1; ::access((file + ".snap" + std::to_string(i)).c_str(), F_OK) == 0; ++i) {
    ::unlink((file + ".snap" + std::to_string(i)).c_str());
  }
  ::unlink(file.c_str());
}

// `record A B --snapshot-on --kernel`: the snapshot is of both processes, with the kernel
// window (the flight capture follows every process recorded). The triggers count graphs
// from those the workloads had ended when the test looked, so the recording's length is a
// number of graphs, not a time (>=: an overwrite ring may lose the one record of a graph
// to a recorder that fell behind).
TEST(KernelTest, FlightSnapshotOfSeveralProcessesHoldsBothAndTheKernelWindow) {
  SKIP_WITHOUT_KERNEL_TRACING();
  LoopWorkload a("overwrite"), b("overwrite");
  ASSERT_TRUE(a.ready());
  ASSERT_TRUE(b.ready());
  // Held until the recorder runs, so that the graphs the triggers count happen while it
  // watches (a recorder that starts late would find them in the rings' history).
  const pid_t pa = std::stoi(a.pid()), pb = std::stoi(b.pid());
  kill(pa, SIGSTOP);
  kill(pb, SIGSTOP);
  const uint64_t at = std::max(last_graph(a.pid()), last_graph(b.pid()));
  const std::string file = temp_file("flight-several");
  ChildProcess rec({kCli, "record", a.pid(), b.pid(), "--kernel", "block,io_uring", "--snapshot-on",
                    "iograph:graph_end graph>=" + std::to_string(at + 100), "--stop-on",
                    "iograph:graph_end graph>=" + std::to_string(at + 150),
                    "--kernel-flight-buffer", "256", "-o", file},
                   {});
  const bool started = wait_for([&] { return has_flight_instance(rec.pid()); }, 60);
  kill(pa, SIGCONT);
  kill(pb, SIGCONT);
  ASSERT_TRUE(started);
  const int status = rec.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(instances_of(rec.pid()).empty()) << "both instances go with the recorder";
  // The recording has both, each up to where the first reached the stop.
  auto whole = Trace::open(file);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  std::map<uint32_t, uint64_t> recorded;
  auto records = (*whole)->read_all();
  Record r;
  while (records->next(&r)) ++recorded[(*whole)->threads()[r.thread].pid];
  EXPECT_GT(recorded[pa], 0u);
  EXPECT_GT(recorded[pb], 0u);
  ASSERT_EQ(::access((file + ".snap1").c_str(), F_OK), 0) << "no snapshot";
  auto snap = Trace::open(file + ".snap1");
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ((*snap)->processes().size(), 2u);
  Window w = read_window(file + ".snap1");
  EXPECT_TRUE(w.sorted) << "kernel and user records merged in time order";
  EXPECT_GT(w.user[pa], 0u);
  EXPECT_GT(w.user[pb], 0u);
  EXPECT_GT(w.issues, 0u);
  EXPECT_GT(w.uring, 0u);
  remove_recording(file);
}

// `run --snapshot-on --kernel -- sh -c 'iograph & iograph'`: the snapshot holds the command's
// processes and the kernel window; graph numbers start with each process, so the triggers
// count graphs of the command (100: the kernel filters take up a new thread within 0.2 s).
TEST(KernelTest, FlightSnapshotOfACommandHoldsItsProcessesAndTheKernelWindow) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string file = temp_file("flight-run");
  const std::string iograph = kBin +
                              "/iograph bench --target loop --shapes rope --size 128 --repeat 150 "
                              "--warmup 0 --backends uring-ready --trace >/dev/null";
  int code = 0;
  const std::string out =
      run_command("NANOTRACE_BUFFER=4M " + kCli + " run --kernel block,io_uring --snapshot-on " +
                      "'iograph:graph_end graph>=100' -o " + file + " -- sh -c '" + iograph +
                      " & " + iograph + "; wait' 2>&1",
                  &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("snapshot written: " + file + ".snap1 (kernel: "), std::string::npos) << out;
  auto snap = Trace::open(file + ".snap1");
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  uint64_t iographs = 0;
  for (const ProcessInfo& p : (*snap)->processes()) iographs += p.process_name == "iograph";
  EXPECT_GE(iographs, 1u);
  Window w = read_window(file + ".snap1");
  EXPECT_TRUE(w.sorted);
  EXPECT_GT(w.issues, 0u);
  EXPECT_GT(w.uring, 0u);
  remove_recording(file);
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
