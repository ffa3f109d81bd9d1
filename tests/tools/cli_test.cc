// The nanotrace CLI against a live process of another program (the storage_sim example):
// list, events, enable/disable, dump, stats, and bad input (a wrong pid, an unknown group or
// event) giving one clear line and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "common/child_process.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using nlohmann::json;
using testing::run_command;

const std::string kCli = std::string(NANOTRACE_BIN_DIR) + "/nanotrace";

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{std::string(NANOTRACE_BIN_DIR) + "/storage_sim", "--threads", "2",
                                 "--seconds", "60", "--gap-ns", "2000"},
        std::vector<std::string>{"NANOTRACE_NAME=cli-test-sim"});
    std::string line = sim_->read_line();  // "storage_sim pid N segment ..."
    pid_ = std::to_string(std::stol(line.substr(line.find("pid ") + 4)));
    // It prints that line before its threads start: wait (10 s at most) until the main
    // thread and both workers have traced, the state every test here describes.
    for (int i = 0; i < 1000; ++i) {
      auto trace = Trace::open(pid_);
      if (trace.ok() && (*trace)->threads().size() >= 3) return;
      usleep(10000);
    }
    ADD_FAILURE() << "storage_sim " << pid_ << " did not start its two threads in 10 s";
  }
  void TearDown() override { sim_.reset(); }  // SIGKILL; the segment is removed below
  ~CliTest() override { unlink(("/dev/shm/nanotrace-" + pid_).c_str()); }

  json run_json(const std::string& args) {
    int code = 0;
    std::string out = run_command(kCli + " " + args, &code);
    EXPECT_EQ(code, 0) << args << ": " << out;
    return json::parse(out);
  }

  std::unique_ptr<testing::ChildProcess> sim_;
  std::string pid_;
};

TEST_F(CliTest, ListEventsDumpStatsOfALiveProcess) {
  json list = run_json("list --json");
  bool found = false;
  for (const json& p : list) {
    if (std::to_string(p["pid"].get<int>()) != pid_) continue;
    found = true;
    EXPECT_EQ(p["name"], "cli-test-sim");
    EXPECT_EQ(p["alive"], true);
    EXPECT_EQ(p["mode"], "overwrite");
    EXPECT_GE(p["threads"].get<int>(), 2);
  }
  EXPECT_TRUE(found);

  json events = run_json("events --json " + pid_);
  std::set<std::string> names;
  for (const json& e : events)
    names.insert(e["group"].get<std::string>() + ":" + e["event"].get<std::string>());
  for (const char* n : {"io:submit", "io:complete", "io:error", "debug:checkpoint", "app:start"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  for (const json& e : events) {
    if (e["event"] == "submit") {
      ASSERT_EQ(e["fields"].size(), 4u);
      EXPECT_EQ(e["fields"][1]["name"], "dev");
      EXPECT_EQ(e["fields"][1]["type"], "string");
      EXPECT_EQ(e["fields"][3]["type"], "u32");
    }
  }

  // dump --json: merged by time, named fields.
  int code = 0;
  std::string dump = run_command(kCli + " dump --json -n 200 name:cli-test-sim", &code);
  ASSERT_EQ(code, 0);
  size_t lines = 0;
  uint64_t last = 0;
  std::istringstream in(dump);
  for (std::string line; std::getline(in, line); ++lines) {
    json r = json::parse(line);
    EXPECT_GE(r["time_ns"].get<uint64_t>(), last);
    last = r["time_ns"].get<uint64_t>();
    if (r["event"] == "io:submit") {
      EXPECT_TRUE(r["fields"].contains("offset"));
    }
  }
  EXPECT_EQ(lines, 200u);

  json stats = run_json("stats --json " + pid_);
  EXPECT_GT(stats["records"].get<uint64_t>(), 0u);
  uint64_t per_event = 0;
  for (const json& e : stats["events"]) per_event += e["count"].get<uint64_t>();
  EXPECT_EQ(per_event, stats["records"].get<uint64_t>());
}

TEST_F(CliTest, DisableAndEnableAGroupFromOutside) {
  auto debug_on = [&] {
    for (const json& e : run_json("events --json " + pid_)) {
      if (e["group"] == "debug") return e["enabled"].get<bool>();
    }
    return false;
  };
  auto checkpoints = [&] {
    json s = run_json("stats --json " + pid_);
    for (const json& e : s["events"]) {
      if (e["event"] == "debug:checkpoint") return e["count"].get<uint64_t>();
    }
    return uint64_t{0};
  };
  EXPECT_TRUE(debug_on());
  int code = 0;
  run_command(kCli + " disable " + pid_ + " debug", &code);
  ASSERT_EQ(code, 0);
  EXPECT_FALSE(debug_on());
  // With the group off, the process stops recording checkpoints: the ring count stays put
  // or falls (overwrite) while io events keep flowing.
  usleep(300000);
  uint64_t before = checkpoints();
  usleep(300000);
  EXPECT_LE(checkpoints(), before);
  run_command(kCli + " enable " + pid_ + " debug", &code);
  ASSERT_EQ(code, 0);
  EXPECT_TRUE(debug_on());
}

// One grammar for a group list wherever one is accepted, with one error text.
TEST_F(CliTest, GroupListsShareOneGrammarAndOneError) {
  auto enabled = [&] {
    std::map<std::string, bool> on;
    for (const json& e : run_json("events --json " + pid_)) on[e["group"]] = e["enabled"];
    return on;
  };
  int code = 0;
  std::string out = run_command(kCli + " disable " + pid_ + " all,-io", &code);
  ASSERT_EQ(code, 0) << out;
  std::map<std::string, bool> on = enabled();
  EXPECT_TRUE(on["io"]);
  EXPECT_FALSE(on["debug"]);
  EXPECT_FALSE(on["app"]);
  out = run_command(kCli + " enable " + pid_ + " debug app", &code);  // two words, one list
  ASSERT_EQ(code, 0) << out;
  on = enabled();
  EXPECT_TRUE(on["debug"] && on["app"] && on["io"]);

  const std::string trace = "/tmp/cli-test-groups-" + pid_ + ".ntr";
  const std::string iograph = std::string(NANOTRACE_BIN_DIR) + "/iograph";
  const std::string expected = "no group named 'nosuch' (groups: ";
  for (const std::string& command :
       {kCli + " enable " + pid_ + " io,nosuch", kCli + " disable " + pid_ + " all,-nosuch",
        kCli + " record " + pid_ + " --duration 1 --groups all,-nosuch -o " + trace,
        iograph + " perf --time 0.2 --trace nosuch"}) {
    out = run_command(command + " 2>&1", &code);
    EXPECT_NE(code, 0) << command;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << command << ": " << out;
    EXPECT_NE(out.find(expected), std::string::npos) << command << ": " << out;
  }
  unlink(trace.c_str());
  EXPECT_TRUE(enabled()["debug"]) << "a refused list must change nothing";
  // `all` is a group list for iograph too (3 s: enough measured slices on a loaded machine).
  out = run_command(iograph + " perf --time 3 --slice-ms 10 --trace all 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
}

// Enum fields print their value names in dump and every export, and CTF declares an enum:
// iograph's backend, op and state on a 4-node rope whose node 2 fails on the nop target.
// NANOTRACE_TRIGGER names an event of the program: the runtime, started first by the library
// (which has no tracepoints), arms it when the program's register, without a warning; an
// event that no module has is said once.
TEST(EnvironmentTriggerTest, WarnsOnlyOfAnEventNoModuleHas) {
  const std::string sim = std::string(NANOTRACE_BIN_DIR) + "/storage_sim --threads 1 --ops 50";
  int code = 0;
  std::string out = run_command("NANOTRACE_TRIGGER='io:error' " + sim + " 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("NANOTRACE_TRIGGER"), std::string::npos) << out;
  out = run_command("NANOTRACE_TRIGGER='io:nosuch' " + sim + " 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  const std::string warning = "NANOTRACE_TRIGGER: no event io:nosuch";
  const size_t at = out.find(warning);
  EXPECT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find(warning, at + 1), std::string::npos) << out;
}

TEST(EnumFieldsTest, IographFieldsPrintNamesEverywhere) {
  const std::string bin = std::string(NANOTRACE_BIN_DIR);
  const std::string dir = "/tmp/cli-test-enums-" + std::to_string(getpid());
  int code = 0;
  run_command("rm -rf " + dir + " && mkdir -p " + dir, &code);
  run_command(bin + "/iograph gen --shape rope --nodes 4 -o " + dir + "/rope.json 2>/dev/null",
              &code);
  ASSERT_EQ(code, 0);
  std::string out =
      run_command("sh -c 'echo $$; NANOTRACE_KEEP=1 exec " + bin + "/iograph run " + dir +
                      "/rope.json --backend uring-link --target nop --fail 2' 2>&1",
                  &code);
  ASSERT_EQ(code, 3) << out;  // the graph ran, one node failed
  const std::string segment = "/dev/shm/nanotrace-" + out.substr(0, out.find('\n'));

  std::string dump = run_command(kCli + " dump " + segment, &code);
  ASSERT_EQ(code, 0) << dump;
  EXPECT_NE(dump.find("backend=uring-link op=read"), std::string::npos) << dump;
  EXPECT_NE(dump.find("result=-5 lat_us="), std::string::npos) << dump;
  EXPECT_EQ(dump.find("backend=3"), std::string::npos) << dump;
  std::set<std::string> states;
  std::istringstream lines(
      run_command(kCli + " dump --json -e iograph:node_complete " + segment, &code));
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line);
    EXPECT_EQ(j["fields"]["backend"], "uring-link") << line;
    states.insert(j["fields"]["state"].get<std::string>());
  }
  EXPECT_TRUE(states.count("ok") && states.count("failed")) << dump;

  for (const char* format : {"jsonl", "csv", "chrome", "perfetto"}) {
    const std::string file = dir + "/trace." + format;
    out =
        run_command(kCli + " export " + segment + " -f " + format + " -o " + file + " 2>&1", &code);
    ASSERT_EQ(code, 0) << format << ": " << out;
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(bytes.find("uring-link"), std::string::npos) << format;
    EXPECT_NE(bytes.find("failed"), std::string::npos) << format;
  }
  out = run_command(kCli + " export " + segment + " -f ctf -o " + dir + "/ctf 2>&1", &code);
  ASSERT_EQ(code, 0) << out;
  std::string text = run_command("babeltrace2 " + dir + "/ctf 2>&1", &code);
  ASSERT_EQ(code, 0) << text;
  EXPECT_NE(text.find("backend = ( \"uring-link\" : container = 3 )"), std::string::npos) << text;
  EXPECT_NE(text.find("state = ( \"failed\" : container = 2 )"), std::string::npos) << text;
  EXPECT_NE(text.find("op = ( \"read\" : container = 0 )"), std::string::npos) << text;
  unlink(segment.c_str());
  run_command("rm -rf " + dir, &code);
}

TEST_F(CliTest, BadInputGivesOneLineAndNonZeroExit) {
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {"dump 999999", "no process 999999"},
      {"stats notapid/../x", "no nanotrace segment"},
      {"enable " + pid_ + " nosuchgroup", "no group named 'nosuchgroup'"},
      {"dump " + pid_ + " -e io:nosuch", "no event or group 'io:nosuch'"},
      {"events name:nobody-has-this-name", "no live traced process named"},
      {"arm " + pid_ + " 'io:nosuch'", "no event io:nosuch"},
      {"arm " + pid_ + " 'io:complete lat_us>>3'", ""},
  };
  for (const Case& c : cases) {
    int code = 0;
    std::string out = run_command(kCli + " " + c.args + " 2>&1", &code);
    EXPECT_NE(code, 0) << c.args;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << c.args << ": " << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << c.args << ": " << out;
  }
}

// The network commands' libraries (NATS, libcurl, libmicrohttpd and what they bring) are
// loaded by nanotrace-net alone: the other commands start without them.
TEST(NetworkCommandsTest, OtherCommandsDoNotLoadTheNetworkLibraries) {
  int code = 0;
  std::string loaded = run_command("LD_DEBUG=libs " + kCli + " list 2>&1 >/dev/null", &code);
  EXPECT_EQ(code, 0) << loaded;
  EXPECT_NE(loaded.find("libfmt"), std::string::npos) << "LD_DEBUG printed nothing: " << loaded;
  for (const char* lib : {"libnats", "libcurl", "libmicrohttpd", "libgnutls"}) {
    EXPECT_EQ(loaded.find(lib), std::string::npos) << "`nanotrace list` loaded " << lib;
  }
  loaded = run_command(
      "LD_DEBUG=libs " + kCli + " fleet status --broker nats://127.0.0.1:1 --timeout-ms 100 2>&1",
      &code);
  EXPECT_NE(loaded.find("libnats"), std::string::npos) << "fleet did not run in nanotrace-net";
}

// agent, fleet and ship run in nanotrace-net, with the same arguments; without it beside
// nanotrace, one line says so.
// Its fixture's live process is a source `ship` can open.
TEST_F(CliTest, NetworkCommandsRunInTheHelperOrSayItIsMissing) {
  const std::string creds = ::testing::TempDir() + "/network-commands-creds";
  { std::ofstream(creds) << "token = t\n"; }
  chmod(creds.c_str(), 0600);
  int code = 0;
  std::string out = run_command(kCli + " fleet status --broker nats://127.0.0.1:1 --credentials " +
                                    creds + " --timeout-ms 100 2>&1",
                                &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("cannot connect to nats://127.0.0.1:1"), std::string::npos) << out;
  // A missing file is said before the server is contacted; an unreachable server after the
  // retries --retry-for allows (none here).
  out = run_command(kCli + " ship /nonexistent.nt --clickhouse http://127.0.0.1:1 2>&1", &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("/nonexistent.nt"), std::string::npos) << out;
  EXPECT_EQ(out.find("127.0.0.1"), std::string::npos) << out;
  out = run_command(kCli + " ship " + pid_ + " --clickhouse http://127.0.0.1:1 --retry-for 0 2>&1",
                    &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("127.0.0.1"), std::string::npos) << out;
  const std::string alone = ::testing::TempDir() + "/nanotrace-alone";
  run_command("rm -rf " + alone + " && mkdir -p " + alone + " && cp " + kCli + " " + alone, &code);
  ASSERT_EQ(code, 0);
  out = run_command(alone + "/nanotrace fleet status --credentials " + creds + " 2>&1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("nanotrace-net (which runs agent, fleet and ship) is not installed"),
            std::string::npos)
      << out;
  out = run_command(alone + "/nanotrace --help 2>&1", &code);  // the others need no helper
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("fleet"), std::string::npos) << out;
  run_command("rm -rf " + alone + " " + creds, &code);
}

}  // namespace
}  // namespace nanotrace
