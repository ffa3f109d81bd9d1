// Shared objects with tracepoints: unloading one is safe while another process switches
// groups, its events stay listed and its records readable; and a plugin that carries its own
// copy of the static library, loaded by a host built without -rdynamic, still shares the
// host's one runtime and one segment.
#include <glob.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/child_process.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;

const std::string kBin = NANOTRACE_BIN_DIR;
const std::string kCli = kBin + "/nanotrace";
const std::string kLibDir = std::string(NANOTRACE_BIN_DIR) + "/../tests/runtime";

pid_t read_pid(ChildProcess& child) {
  std::string line = child.read_line();
  return line.rfind("pid ", 0) == 0 ? static_cast<pid_t>(std::stol(line.substr(4))) : -1;
}

// Removes whatever segments a helper left, however the test ends.
struct SegmentCleanup {
  pid_t pid = -1;
  ~SegmentCleanup() {
    if (pid > 0)
      for (const std::string& s : testing::segments_of(pid)) unlink(s.c_str());
  }
};

// plugin:ev records read from `trace`: how many, and how many carry a wrong check field.
struct PluginRecords {
  uint64_t records = 0, bad = 0, host = 0;
};
PluginRecords read_plugin_records(Trace& trace) {
  PluginRecords out;
  auto source = trace.read_all();
  Record r;
  while (source->next(&r)) {
    if (r.event->group == "host") ++out.host;
    if (r.event->full_name() != "plugin:ev") continue;
    ++out.records;
    if (r.field_count != 2 || r.values[1].bits != r.values[0].bits * 3 + 1) ++out.bad;
  }
  return out;
}

std::set<std::string> listed_events(pid_t pid) {
  int code = 0;
  std::string out =
      testing::run_command(kCli + " events " + std::to_string(pid) + " --json", &code);
  std::set<std::string> names;
  EXPECT_EQ(code, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_array()) return names;
  for (const auto& e : j) {
    if (e.contains("group") && e.contains("event")) {
      names.insert(e["group"].get<std::string>() + ":" + e["event"].get<std::string>());
    }
  }
  return names;
}

TEST(ModuleSafetyTest, DlcloseWhileGroupsAreToggledFromOutside) {
  ChildProcess host({kBin + "/nanotrace_dlopen_host", kLibDir + "/libnanotrace_test_plugin.so",
                     "--close", "--tick"},
                    {});
  pid_t pid = read_pid(host);
  ASSERT_GT(pid, 0);
  SegmentCleanup cleanup{pid};
  ASSERT_EQ(host.read_line(), "loaded");
  ASSERT_EQ(host.read_line(), "closed");
  // The control thread applies each toggle to every registered call site: those of the
  // unloaded plugin must no longer be among them.
  std::string p = std::to_string(pid);
  for (int toggles = 0; toggles < 40; ++toggles) {
    int code = 0;
    testing::run_command(kCli + " disable " + p + " plugin host >/dev/null 2>&1", &code);
    testing::run_command(kCli + " enable " + p + " plugin host >/dev/null 2>&1", &code);
  }
  host.write_line("stop");
  if (host.read_line() != "ready") {
    int status = host.wait();
    FAIL() << "the host died while groups were toggled: wait status " << status
           << (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")" : "");
  }
  // Its events are still listed, and the records written before the unload still read back.
  std::set<std::string> events = listed_events(pid);
  EXPECT_TRUE(events.count("plugin:ev")) << "plugin events no longer listed after dlclose";
  EXPECT_TRUE(events.count("host:tick"));
  auto trace = Trace::open_pid(pid);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  PluginRecords r = read_plugin_records(**trace);
  EXPECT_EQ(r.records, 200u);
  EXPECT_EQ(r.bad, 0u);
  EXPECT_GT(r.host, 0u);
  host.close_stdin();
  int status = host.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "host status " << status << (WIFSIGNALED(status) ? " (killed by a signal)" : "");
}

TEST(ModuleSafetyTest, StaticPluginInHostWithoutRdynamicSharesOneRuntime) {
  ChildProcess host(
      {kBin + "/nanotrace_static_host", kLibDir + "/libnanotrace_test_static_plugin.so"}, {});
  pid_t pid = read_pid(host);
  ASSERT_GT(pid, 0);
  SegmentCleanup cleanup{pid};
  ASSERT_EQ(host.read_line(), "loaded");
  ASSERT_EQ(host.read_line(), "ready");
  // One segment, under the live name: the host's was not set aside as a dead process's.
  std::vector<std::string> segments = testing::segments_of(pid);
  EXPECT_EQ(segments, std::vector<std::string>{testing::segment_of(pid)})
      << "the host's live segment was set aside by a second runtime";
  auto trace = Trace::open_pid(pid);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE((*trace)->process().alive);
  // Events of both host and plugin land in it.
  PluginRecords r = read_plugin_records(**trace);
  EXPECT_EQ(r.records, 200u) << "plugin records not in the host's segment";
  EXPECT_EQ(r.bad, 0u);
  EXPECT_GE(r.host, 2u) << "host records not in the segment";
  std::set<std::string> events = listed_events(pid);
  EXPECT_TRUE(events.count("plugin:ev"));
  EXPECT_TRUE(events.count("host:start"));
  host.close_stdin();
  int status = host.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace nanotrace
