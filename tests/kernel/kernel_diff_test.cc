// `nanotrace diff` on a kernel-level regression: the same iograph workload on a loop device,
// recorded with --kernel io_uring,block, once as it is (A) and once with its reads throttled
// by the block layer's cgroup throttle (B: io.max of cgroup v2, or blkio.throttle of v1 where
// the io controller is bound to v1). diff must put the change in the kernel's stages of the
// I/Os (io_uring submit -> block issue -> block complete), not in user space. Label: system
// (root, tracefs, a loop device, cgroups).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/kernel_fixture.hpp"

namespace nanotrace {
namespace {

using namespace kernel_test;  // NOLINT: the shared helpers
using nlohmann::json;
namespace fs = std::filesystem;

// The loop device a process holds open ("MAJ:MIN"), or "".
std::string loop_device_of(const std::string& pid) {
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator("/proc/" + pid + "/fd", ec)) {
    const fs::path target = fs::read_symlink(fd.path(), ec);
    if (ec || target.string().rfind("/dev/loop", 0) != 0) continue;
    struct stat st;
    if (::stat(target.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
      return std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    }
  }
  return "";
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// A cgroup that limits one device's reads to `iops`, holding one process; removed at the end.
class Throttle {
 public:
  Throttle(const std::string& pid, const std::string& device, int iops) {
    const std::string name = "nanotrace-diff-test-" + std::to_string(getpid());
    std::ifstream controllers("/sys/fs/cgroup/cgroup.controllers");
    std::string list((std::istreambuf_iterator<char>(controllers)), {});
    if (list.find("io") != std::string::npos) {
      // cgroup v2: io.max, once the io controller is enabled for the children of the root.
      write_file("/sys/fs/cgroup/cgroup.subtree_control", "+io");
      dir_ = "/sys/fs/cgroup/" + name;
      fs::create_directory(dir_);
      ok_ = write_file(dir_ + "/io.max", device + " riops=" + std::to_string(iops)) &&
            write_file(dir_ + "/cgroup.procs", pid);
      how_ = "io.max";
    } else if (fs::exists("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device")) {
      dir_ = "/sys/fs/cgroup/blkio/" + name;
      fs::create_directory(dir_);
      ok_ = write_file(dir_ + "/blkio.throttle.read_iops_device",
                       device + " " + std::to_string(iops)) &&
            write_file(dir_ + "/cgroup.procs", pid);
      how_ = "blkio.throttle.read_iops_device";
    }
  }
  ~Throttle() {
    if (!dir_.empty()) ::rmdir(dir_.c_str());  // empty once the workload was killed
  }
  bool ok() const { return ok_; }
  const std::string& how() const { return how_; }

 private:
  std::string dir_, how_;
  bool ok_ = false;
};

std::string record(LoopWorkload& w, const char* name, int seconds) {
  const std::string file = temp_file(name);
  int code = 0;
  const std::string out =
      testing::run_command(kCli + " record " + w.pid() + " --kernel io_uring,block --duration " +
                               std::to_string(seconds) + " -o " + file + " 2>&1",
                           &code);
  EXPECT_EQ(code, 0) << out;
  return file;
}

TEST(KernelDiffTest, ThrottledBlockDeviceShowsInTheKernelStages) {
  SKIP_WITHOUT_KERNEL_TRACING();
  std::string a, b, how;
  {
    LoopWorkload w;
    ASSERT_TRUE(w.ready());
    a = record(w, "diff-a", 2);
  }
  {
    LoopWorkload w;
    ASSERT_TRUE(w.ready());
    std::string device;
    wait_for([&] { return !(device = loop_device_of(w.pid())).empty(); }, 30);
    ASSERT_FALSE(device.empty()) << "no loop device open in " << w.pid();
    // The throttle lets a slice's share of reads through at once and holds the next one for
    // the rest of the slice (about 100 ms): at 300 reads/s, one read in 30 waits, so the p99
    // of the wait before the block issue moves (with 4 s of reads: 1200, enough for a p99).
    Throttle throttle(w.pid(), device, 300);
    if (!throttle.ok()) GTEST_SKIP() << "no cgroup block throttle (io.max or blkio) here";
    how = throttle.how();
    b = record(w, "diff-b", 4);
  }
  int code = 0;
  const std::string out = testing::run_command(kCli + " diff " + a + " " + b + " --json", &code);
  ASSERT_EQ(code, 0) << out;
  const json d = json::parse(out);
  // The top stage changed is one of the kernel's, and it adds far more than user space (one
  // run a side: the changes are observed, not attributable).
  const json* top = nullptr;
  double user_added = 0;
  for (const json& i : d["observed_ranked"]) {
    const json& s = d["subjects"][i.get<size_t>()];
    if (s["kind"] != "stage") continue;
    if (top == nullptr) top = &s;
    const std::string name = s["name"];
    if (name == "user submit -> io_uring submit" || name == "io_uring complete -> user complete") {
      user_added += std::max(0.0, s["added"].get<double>());
    }
  }
  for (const json& s : d["subjects"]) {
    if (s["kind"] != "stage") continue;
    std::string line = s["name"].get<std::string>() + ":";
    for (const json& m : s["metrics"]) {
      line += " " + m["metric"].get<std::string>() + " " +
              std::to_string(static_cast<int64_t>(m["a"].get<double>())) + "->" +
              std::to_string(static_cast<int64_t>(m["b"].get<double>())) +
              (m["observed"].get<bool>() ? "o" : "");
    }
    std::printf("%s (%llu -> %llu)\n", line.c_str(),
                static_cast<unsigned long long>(s["count_a"].get<uint64_t>()),
                static_cast<unsigned long long>(s["count_b"].get<uint64_t>()));
  }
  ASSERT_NE(top, nullptr) << "no stage changed (throttled by " << how << "): " << d["headline"];
  const std::string name = (*top)["name"];
  std::printf("throttled by %s: %s\ntop stage: %s, adds %.0f ns per run\n", how.c_str(),
              d["headline"].get<std::string>().c_str(), name.c_str(),
              (*top)["added"].get<double>());
  EXPECT_TRUE(name == "io_uring submit -> block issue" || name == "block issue -> block complete")
      << name;
  EXPECT_LT(user_added, 0.1 * (*top)["added"].get<double>()) << out;
  if (::testing::Test::HasFailure()) {
    std::printf("recordings kept: %s %s\n", a.c_str(), b.c_str());
    return;
  }
  fs::remove(a);
  fs::remove(b);
}

// A run whose program did no I/O while the kernel was traced measures no I/O stage: diff says
// so instead of comparing them as unchanged (a workload stopped for the whole recording, while
// another program's I/O fills the kernel's events).
TEST(KernelDiffTest, ARunWithoutIoThroughAStageLeavesTheStageOut) {
  SKIP_WITHOUT_KERNEL_TRACING();
  std::string a, b;
  {
    LoopWorkload w;
    ASSERT_TRUE(w.ready());
    a = record(w, "idle-a", 1);
  }
  {
    // Another program's I/O meanwhile: B holds kernel I/O events, none of them its program's.
    LoopWorkload other;
    ASSERT_TRUE(other.ready());
    // Stopped once traced; run again until it has submitted I/O (so that its trace names the
    // event), then stopped for the whole recording.
    LoopWorkload stopped("block", 1000);
    ASSERT_TRUE(stopped.ready());
    const pid_t pid = std::stoi(stopped.pid());
    ::kill(pid, SIGCONT);
    int code = 0;
    const bool submitted = wait_for(
        [&] {
          return testing::run_command(kCli + " stats " + stopped.pid() + " 2>&1", &code)
                     .find("iograph:node_submit") != std::string::npos;
        },
        30);
    ::kill(pid, SIGSTOP);
    ASSERT_TRUE(submitted);
    b = record(stopped, "idle-b", 1);
  }
  int code = 0;
  const std::string out = testing::run_command(kCli + " diff " + a + " " + b + " --json", &code);
  ASSERT_EQ(code, 0) << out;
  const json d = json::parse(out);
  for (const json& s : d["subjects"]) EXPECT_NE(s["kind"], "stage") << s["name"];
  size_t left_out = 0;
  for (const json& n : d["notes"]) {
    const std::string note = n;
    if (note.find("I/O stage") != std::string::npos &&
        note.find("not compared: a run of B holds no I/O") != std::string::npos) {
      ++left_out;
    }
  }
  EXPECT_EQ(left_out, 5u) << d["notes"];
  fs::remove(a);
  fs::remove(b);
}

// Off-CPU time: the write stage sleeps 200 us per request in A, 2.2 ms in B; recorded with
// --kernel sched, diff finds the thread's off-CPU gaps and time grown by about that much.
TEST(KernelDiffTest, SleepShowsAsOffCpuTimeOfTheThread) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string a = temp_file("sched-a"), b = temp_file("sched-b");
  int code = 0;
  for (const auto& [file, extra] :
       {std::pair{a, " --sleep-us 200"}, std::pair{b, " --sleep-us 2200"}}) {
    const std::string out =
        testing::run_command(kCli + " run --kernel sched -o " + file + " -- " + kBin +
                                 "/stages_program --requests 300" + extra + " 2>&1",
                             &code);
    ASSERT_EQ(code, 0) << out;
  }
  const std::string out = testing::run_command(kCli + " diff " + a + " " + b + " --json", &code);
  ASSERT_EQ(code, 0) << out;
  const json d = json::parse(out);
  const json* off = nullptr;
  for (const json& s : d["subjects"]) {
    if (s["kind"] == "thread" && s["name"] == "stages_program off-CPU") off = &s;
  }
  ASSERT_NE(off, nullptr) << out;
  EXPECT_TRUE((*off)["observed"].get<bool>()) << out;  // one run a side: not attributable
  EXPECT_FALSE((*off)["significant"].get<bool>()) << out;
  // Every sleep is one off-CPU gap, seen in both runs, even where the kernel did not log the
  // switch back in (it omits many switches from the idle task): its end is then the thread's
  // next record, unless the thread was preempted before writing one (a busy machine: 1 of
  // 300 once), when the gap's end is unknown and it is not counted. Preemptions are not
  // among them (the thread was runnable: "waiting for a CPU"), however many a loaded machine
  // makes.
  EXPECT_GE((*off)["count_a"].get<double>(), 295) << out;
  EXPECT_GE((*off)["count_b"].get<double>(), 295) << out;
  EXPECT_LT((*off)["count_b"].get<double>(), 310) << out;  // a few from the start-up
  for (const json& m : (*off)["metrics"]) {
    if (m["metric"] == "p50") {
      EXPECT_NEAR(m["delta"].get<double>(), 2e6, 0.2e6) << out;
    }
  }
  // Each sleep 2 ms longer: more off the CPU in all. Not 0.6 s more: a total carries each
  // run's wake-up latencies, which a loaded machine makes unequal (0.20 s more once, beside a
  // build and two CPU hogs); the median above is the measure that holds.
  EXPECT_GT((*off)["added"].get<double>(), 0) << out;
  fs::remove(a);
  fs::remove(b);
}

}  // namespace
}  // namespace nanotrace
