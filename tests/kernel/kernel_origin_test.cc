// The time origin of a trace whose kernel events begin before its first process: `run
// --kernel` starts the capture, then the command, whose first system calls (the dynamic
// loader's openat) come before its segment exists. Every record's time_ns counts from the
// earliest event, so `dump --json` keeps them in order, none clamped to 0.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "common/child_process.hpp"
#include "kernel/kernel_fixture.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using namespace kernel_test;  // NOLINT: the shared helpers
using nlohmann::json;
using testing::run_command;

TEST(KernelTest, KernelEventsBeforeTheFirstProcessKeepTheirTimes) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string file = temp_file("origin");
  int code = 0;
  // (Under ASan the preloaded interposer comes before the ASan runtime: allowed here.)
  std::string out =
      run_command("echo go | ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0\" " + kCli +
                      " run --kernel syscalls:sys_enter_openat,syscalls:sys_exit_openat,"
                      "syscalls:sys_enter_getppid -o " +
                      file + " -- " + kBin + "/nanotrace_syscall_burst 100 2>&1",
                  &code);
  ASSERT_EQ(code, 0) << out;
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const Trace& t = **trace;
  // The origin is the first kernel event, before the segment start, which is after it.
  ASSERT_LT(t.time_origin().ticks, t.process().clock_start.ticks);
  const uint64_t segment_start_ns = t.ticks_to_ns(t.process().clock_start.ticks);
  EXPECT_GT(segment_start_ns, 0u);
  EXPECT_LT(t.time_origin().realtime_ns, t.process().clock_start.realtime_ns);

  std::istringstream lines(run_command(kCli + " dump --json " + file, &code));
  ASSERT_EQ(code, 0);
  std::string line;
  uint64_t records = 0, at_zero = 0, before_segment = 0, previous = 0;
  bool user_seen = false;
  std::set<uint64_t> early_times;  // kernel events before the first user record
  while (std::getline(lines, line)) {
    const json r = json::parse(line);
    const uint64_t ns = r["time_ns"];
    if (records == 0) {
      EXPECT_EQ(ns, 0u) << "the first record is the origin: " << line;
    }
    EXPECT_GE(ns, previous) << "record " << records << ": " << line;
    previous = ns;
    ++records;
    if (ns == 0) ++at_zero;
    if (ns < segment_start_ns) ++before_segment;
    if (!r.contains("kernel")) {
      user_seen = true;
    } else if (!user_seen) {
      early_times.insert(ns);
    }
  }
  ASSERT_TRUE(user_seen) << "no user-space record";
  // Clamping would put every event before the segment start at 0.
  EXPECT_LE(at_zero, 1u) << "records clamped to the origin";
  EXPECT_GE(before_segment, 2u) << "the loader's openat calls come before the segment";
  EXPECT_GE(early_times.size(), 2u);
  ::unlink(file.c_str());
}

}  // namespace
}  // namespace nanotrace
