// Kernel events in the CTF export, read back by the real babeltrace2: a kernel trace beside
// the user-space one, on the same clock (merged in time order, the kernel's getppid calls
// between the user events that bracket them), with LTTng's event and field names, one stream
// per CPU carrying its cpu_id, every field value as `dump --json` has it, and ftrace's losses
// as discarded-events messages that add up, per CPU, to what `stats` counts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/child_process.hpp"
#include "kernel/kernel_fixture.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using namespace kernel_test;  // NOLINT: the shared helpers
using nlohmann::json;
using testing::ChildProcess;
using testing::run_command;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// stdout of a command, its stderr in *err.
std::string run_split(const std::string& command, std::string* err, int* code) {
  const std::string err_path = temp_file("stderr");
  std::string out = run_command(command + " 2>" + err_path, code);
  *err = read_text(err_path);
  ::unlink(err_path.c_str());
  return out;
}

// nanotrace_syscall_burst making `calls` getppid calls, recorded with `--kernel events`
// ("system:event,..."; not whole systems) and `extra` options into file: the calls are all made
// while the capture of every event is on.
void record_burst(uint64_t calls, const std::string& events, const std::vector<std::string>& extra,
                  const std::string& file, pid_t* burst_pid) {
  ChildProcess burst({kBin + "/nanotrace_syscall_burst", std::to_string(calls)}, {});
  *burst_pid = burst.pid();
  ASSERT_EQ(burst.read_line(), "ready " + std::to_string(burst.pid()));
  std::vector<std::string> argv = {kCli, "record", std::to_string(burst.pid()), "--kernel", events,
                                   "-o", file};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ChildProcess recorder(argv, {});
  // Every event enabled (the recorder enables them one by one).
  auto all_enabled = [&] {
    std::istringstream list(events);
    for (std::string event; std::getline(list, event, ',');) {
      const size_t colon = event.find(':');
      if (colon == std::string::npos) return false;  // whole systems: not enabled one by one
      event[colon] = '/';
      if (!capture_enabled(recorder.pid(), event)) return false;
    }
    return true;
  };
  ASSERT_TRUE(wait_for(all_enabled, 60));
  burst.write_line("go");
  ASSERT_EQ(burst.read_line(), "done");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(recorder.pid(), SIGINT);
  ASSERT_EQ(recorder.wait(), 0);
  burst.close_stdin();
  burst.wait();
  for (const std::string& s : testing::segments_of(*burst_pid)) ::unlink(s.c_str());
}

// One event of `babeltrace2 --clock-cycles` output.
struct BtEvent {
  uint64_t cycles = 0;
  std::string source;  // HOST (kernel) or HOST:PROC:(PID)
  std::string name;
  bool kernel = false;
  int64_t cpu = -1;
  uint64_t tid = 0;
  std::map<std::string, std::string> fields;  // values as printed
};

// "{ a = 1, b = "x, y" }" into its fields (a quoted value may hold commas).
bool parse_fields(const std::string& text, std::map<std::string, std::string>* fields) {
  if (text.size() < 4 || text.compare(0, 2, "{ ") != 0 || text.compare(text.size() - 2, 2, " }")) {
    return text == "{ }";
  }
  const std::string body = text.substr(2, text.size() - 4);
  size_t at = 0;
  while (at < body.size()) {
    const size_t eq = body.find(" = ", at);
    if (eq == std::string::npos) return false;
    const std::string key = body.substr(at, eq - at);
    size_t end = eq + 3;
    if (end < body.size() && body[end] == '"') {
      for (++end; end < body.size() && body[end] != '"'; ++end) {
        if (body[end] == '\\') ++end;
      }
      ++end;
    } else {
      end = body.find(", ", end);
      if (end == std::string::npos) end = body.size();
    }
    (*fields)[key] = body.substr(eq + 3, end - eq - 3);
    at = end;
    if (at < body.size()) {
      if (body.compare(at, 2, ", ") != 0) return false;
      at += 2;
    }
  }
  return true;
}

bool parse_bt_line(const std::string& line, BtEvent* e) {
  static const std::regex kLine(R"(^\[(\d+)\] \(\+[^)]*\) (\S+) ([^ ]+): (.*)$)");
  static const std::regex kKernel(R"(^\{ cpu_id = (\d+) \}, \{ tid = (\d+) \}, (\{.*\})$)");
  static const std::regex kUser(R"(^\{ tid = (\d+) \}, (\{.*\})$)");
  std::smatch m;
  if (!std::regex_match(line, m, kLine)) return false;
  e->cycles = std::stoull(m[1]);
  e->source = m[2];
  e->name = m[3];
  const std::string rest = m[4];
  std::smatch r;
  if (std::regex_match(rest, r, kKernel)) {
    e->kernel = true;
    e->cpu = std::stoll(r[1]);
    e->tid = std::stoull(r[2]);
    return parse_fields(r[3], &e->fields);
  }
  if (std::regex_match(rest, r, kUser)) {
    e->tid = std::stoull(r[1]);
    return parse_fields(r[2], &e->fields);
  }
  return false;
}

// The CTF (LTTng) name of a kernel event `dump` calls "system:event", for the events used here.
std::string lttng_event_name(const std::string& dumped) {
  const std::string name = dumped.substr(dumped.find(':') + 1);
  if (name.rfind("sys_enter_", 0) == 0) return "syscall_entry_" + name.substr(10);
  if (name.rfind("sys_exit_", 0) == 0) return "syscall_exit_" + name.substr(9);
  return name;
}

// LTTng's name for a sched field that ftrace names after the pid (a thread id).
std::string lttng_field_name(const std::string& event, const std::string& field) {
  if (event.rfind("sched:", 0) != 0) return field;
  if (field == "pid") return "tid";
  if (field.size() > 4 && field.compare(field.size() - 4, 4, "_pid") == 0) {
    return field.substr(0, field.size() - 4) + "_tid";
  }
  return field;
}

// A dump --json value as babeltrace2 prints it.
std::string printed(const json& v) {
  if (v.is_string()) return "\"" + v.get<std::string>() + "\"";
  return v.dump();
}

TEST(KernelTest, CtfExportHasAKernelTraceOnTheUserClockWithLttngNames) {
  SKIP_WITHOUT_KERNEL_TRACING();
  constexpr uint64_t kCalls = 2000;
  const std::string file = temp_file("ctf");
  pid_t burst = 0;
  record_burst(kCalls,
               "syscalls:sys_enter_getppid,syscalls:sys_exit_getppid,sched:sched_switch,"
               "sched:sched_wakeup",
               {}, file, &burst);
  if (HasFatalFailure()) return;
  int code = 0;
  const std::string dir = file + ".ctf";
  std::string out =
      run_command(kCli + " export --format ctf -o " + dir + " " + file + " 2>&1", &code);
  ASSERT_EQ(code, 0) << out;

  // The kernel trace: its own metadata, a kernel domain, per-CPU streams, the user trace's
  // clock declared word for word.
  const std::string kernel_meta = read_text(dir + "/kernel/metadata");
  EXPECT_NE(kernel_meta.find("domain = \"kernel\";"), std::string::npos) << kernel_meta;
  EXPECT_NE(kernel_meta.find("tracer_name = \"nanotrace\";"), std::string::npos);
  // The recording kernel's uname (the test records on this machine), as babeltrace2 reads it
  // (its details sink prints a trace's environment with the trace's first message).
  utsname u{};
  ASSERT_EQ(uname(&u), 0);
  const std::string env = run_command(
      "babeltrace2 " + dir + "/kernel -c sink.text.details | grep -A12 'Environment ('", &code);
  EXPECT_NE(env.find("domain: kernel"), std::string::npos) << env;
  EXPECT_NE(env.find(std::string("sysname: ") + u.sysname + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find(std::string("kernel_release: ") + u.release + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find(std::string("kernel_version: ") + u.version + "\n"), std::string::npos) << env;
  std::string user_dir = run_command("ls -d " + dir + "/process-0-* 2>&1", &code);
  ASSERT_EQ(code, 0) << user_dir;
  user_dir.pop_back();
  const std::string user_meta = read_text(user_dir + "/metadata");
  auto clock_of = [](const std::string& m) {
    const size_t at = m.find("\nclock {");
    return at == std::string::npos ? std::string() : m.substr(at, m.find("};", at) - at);
  };
  EXPECT_FALSE(clock_of(kernel_meta).empty());
  EXPECT_EQ(clock_of(kernel_meta), clock_of(user_meta));

  std::string err;
  out = run_split("babeltrace2 --clock-cycles " + dir, &err, &code);
  ASSERT_EQ(code, 0) << err;
  EXPECT_EQ(err, "") << "babeltrace2 warned";
  std::vector<BtEvent> events;
  for (const std::string& line : lines_of(out)) {
    BtEvent e;
    ASSERT_TRUE(parse_bt_line(line, &e)) << "unparsed babeltrace2 line: " << line;
    events.push_back(std::move(e));
  }

  // Merged in time order; the burst's getppid calls all between its two user events.
  int64_t begin = -1, end = -1;
  uint64_t entries = 0, exits = 0, in_burst = 0;
  std::set<std::string> names;
  for (size_t i = 0; i < events.size(); ++i) {
    const BtEvent& e = events[i];
    if (i > 0) {
      EXPECT_GE(e.cycles, events[i - 1].cycles) << "event " << i;
    }
    if (e.name == "test:burst") begin = static_cast<int64_t>(i);
    if (e.name == "test:burst_done") end = static_cast<int64_t>(i);
    if (!e.kernel) continue;
    names.insert(e.name);
    EXPECT_EQ(e.source.find(':'), std::string::npos) << e.source;
    if (e.name == "syscall_entry_getppid" && e.tid == static_cast<uint64_t>(burst)) {
      ++entries;
      in_burst += begin >= 0 && end < 0;
    }
    exits += e.name == "syscall_exit_getppid" && e.tid == static_cast<uint64_t>(burst);
  }
  ASSERT_GE(begin, 0);
  ASSERT_GT(end, begin);
  EXPECT_EQ(entries, kCalls);
  EXPECT_EQ(exits, kCalls);
  EXPECT_EQ(in_burst, kCalls) << "kernel and user events are not on one clock";
  EXPECT_TRUE(names.count("sched_switch")) << "the burst was never switched out?";
  for (const std::string& n : names) {
    EXPECT_EQ(n.find("sys_e"), std::string::npos) << "an ftrace name, not LTTng's: " << n;
  }

  // Each CPU's events, in order, are dump's: name, thread, fields (LTTng's names), and time
  // (relative to the burst's first user event: the clocks' origins may differ).
  out = run_command(kCli + " dump --json " + file, &code);
  ASSERT_EQ(code, 0);
  std::map<int64_t, std::vector<json>> dumped;
  uint64_t burst_ns = 0;
  for (const std::string& line : lines_of(out)) {
    json j = json::parse(line);
    if (j["event"] == "test:burst") burst_ns = j["time_ns"];
    if (j.contains("kernel")) dumped[j["cpu"].get<int64_t>()].push_back(std::move(j));
  }
  std::map<int64_t, std::vector<const BtEvent*>> exported;
  for (const BtEvent& e : events) {
    if (e.kernel) exported[e.cpu].push_back(&e);
  }
  ASSERT_FALSE(exported.empty());
  ASSERT_EQ(exported.size(), dumped.size());
  const uint64_t burst_cycles = events[static_cast<size_t>(begin)].cycles;
  uint64_t compared = 0;
  for (const auto& [cpu, want] : dumped) {
    const std::vector<const BtEvent*>& got = exported[cpu];
    ASSERT_EQ(got.size(), want.size()) << "cpu " << cpu;
    for (size_t i = 0; i < want.size(); ++i) {
      const json& w = want[i];
      const BtEvent& g = *got[i];
      SCOPED_TRACE("cpu " + std::to_string(cpu) + " event " + std::to_string(i) + ": " + w.dump());
      ASSERT_EQ(g.name, lttng_event_name(w["event"]));
      EXPECT_EQ(g.tid, w["tid"].get<uint64_t>());
      EXPECT_EQ(static_cast<int64_t>(g.cycles - burst_cycles),
                static_cast<int64_t>(w["time_ns"].get<uint64_t>() - burst_ns));
      ASSERT_EQ(g.fields.size(), w["fields"].size());
      const std::string event = w["event"];
      for (const auto& [name, value] : w["fields"].items()) {
        const std::string lttng = lttng_field_name(event, name);
        ASSERT_TRUE(g.fields.count(lttng)) << lttng;
        EXPECT_EQ(g.fields.at(lttng), printed(value)) << lttng;
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 2 * kCalls);
  run_command("rm -rf " + dir, &code);
  ::unlink(file.c_str());
}

// `run --kernel` starts the capture before the command: its first system calls (the dynamic
// loader's openat) come before its segment exists. The CTF trace keeps them in order and
// apart, and the user events keep their wall-clock times.
TEST(KernelTest, CtfExportOfARunKeepsKernelEventsFromBeforeTheSegment) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string file = temp_file("ctf-run");
  int code = 0;
  // (Under ASan the preloaded interposer comes before the ASan runtime: allowed here, since
  // what is tested is the export.)
  std::string out =
      run_command("echo go | ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0\" " + kCli +
                      " run --kernel syscalls:sys_enter_openat,syscalls:sys_exit_openat,"
                      "syscalls:sys_enter_getppid -o " +
                      file + " -- " + kBin + "/nanotrace_syscall_burst 100 2>&1",
                  &code);
  ASSERT_EQ(code, 0) << out;
  const std::string dir = file + ".ctf";
  out = run_command(kCli + " export --format ctf -o " + dir + " " + file + " 2>&1", &code);
  ASSERT_EQ(code, 0) << out;
  std::string err;
  out = run_split("babeltrace2 --clock-seconds " + dir, &err, &code);
  ASSERT_EQ(code, 0) << err;
  // "[SECONDS.NANOSECONDS] (+..) SOURCE NAME: ..." -> (ns since the epoch, name, kernel?)
  static const std::regex kLine(R"(^\[(\d+)\.(\d{9})\] \(\+[^)]*\) (\S+) ([^ ]+): )");
  std::vector<std::tuple<uint64_t, std::string, bool>> events;
  for (const std::string& line : lines_of(out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, kLine)) << line;
    events.emplace_back(std::stoull(m[1]) * 1000000000 + std::stoull(m[2]), m[4],
                        m[3].str().find(':') == std::string::npos);
  }
  ASSERT_FALSE(events.empty());
  // The first user event: its wall-clock time is nanotrace's.
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  uint64_t burst_ns = 0;
  for (const std::string& line : lines_of(run_command(kCli + " dump --json " + file, &code))) {
    const json j = json::parse(line);
    if (j["event"] == "test:burst") burst_ns = j["time_ns"];
  }
  size_t first_user = 0;
  while (first_user < events.size() && std::get<2>(events[first_user])) ++first_user;
  ASSERT_LT(first_user, events.size());
  EXPECT_EQ(std::get<1>(events[first_user]), "test:burst");
  EXPECT_EQ(std::get<0>(events[first_user]), (*trace)->time_origin().realtime_ns + burst_ns);
  // Kernel events before it, in order and not all at one instant.
  std::set<uint64_t> times;
  for (size_t i = 0; i < first_user; ++i) {
    EXPECT_EQ(std::get<1>(events[i]).rfind("syscall_", 0), 0u) << std::get<1>(events[i]);
    if (i > 0) {
      EXPECT_GE(std::get<0>(events[i]), std::get<0>(events[i - 1]));
    }
    times.insert(std::get<0>(events[i]));
  }
  EXPECT_GE(first_user, 2u) << "the loader's openat calls come before the segment";
  EXPECT_GE(times.size(), 2u);
  run_command("rm -rf " + dir, &code);
  ::unlink(file.c_str());
}

// A buffer of one page per CPU overflows: babeltrace2 reports each CPU's losses as discarded
// events, as many as `stats` counts for that CPU, and every logged event is in the trace.
TEST(KernelTest, CtfExportReportsFtraceLossesAsDiscardedEvents) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string file = temp_file("ctf-tiny");
  pid_t burst = 0;
  record_burst(300000, "syscalls:sys_enter_getppid", {"--kernel-buffer", "4"}, file, &burst);
  if (HasFatalFailure()) return;
  int code = 0;
  std::string out = run_command(kCli + " stats --json " + file, &code);
  ASSERT_EQ(code, 0) << out;
  const json st = json::parse(out);
  uint64_t logged = 0;
  std::map<std::string, uint64_t> lost;  // by CPU: "cpuN"
  for (const json& e : st["events"]) {
    if (e["event"] == "syscalls:sys_enter_getppid") logged = e["count"];
  }
  uint64_t total = 0;
  for (const json& t : st["threads"]) {
    const std::string name = t["name"];
    if (name.rfind("cpu", 0) != 0 || t["lost"].get<uint64_t>() == 0) continue;
    lost[name] = t["lost"];
    total += lost[name];
  }
  ASSERT_GT(total, 0u) << "a 4 KiB buffer per CPU should overflow: " << out;

  const std::string dir = file + ".ctf";
  out = run_command(kCli + " export --format ctf -o " + dir + " " + file + " 2>&1", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("(" + std::to_string(total) + " lost)"), std::string::npos) << out;
  std::string err;
  out = run_split("(babeltrace2 " + dir + " | grep -c ' syscall_entry_getppid: ')", &err, &code);
  EXPECT_EQ(std::stoull(out), logged);
  static const std::regex kWarn(
      R"re(^WARNING: Tracer discarded (\d+) events? between .* within stream "[^"]*/kernel/stream-(cpu\d+)")re");
  std::map<std::string, uint64_t> reported;
  for (const std::string& l : lines_of(err)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(l, m, kWarn)) << "unexpected babeltrace2 output: " << l;
    reported[m[2]] += std::stoull(m[1]);
  }
  EXPECT_EQ(reported, lost);
  run_command("rm -rf " + dir, &code);
  ::unlink(file.c_str());
}

// Damaged kernel chunks (random bytes, hostile event lengths and commits, a KERNEL_META
// that does not decode) never crash the CTF export: it writes a trace babeltrace2 reads
// without error, user events included, or fails with one line.
TEST(KernelTest, CtfExportOfDamagedKernelChunksIsReadableOrAOneLineError) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string file = temp_file("ctf-damage");
  pid_t burst = 0;
  record_burst(2000,
               "syscalls:sys_enter_getppid,syscalls:sys_exit_getppid,sched:sched_switch,"
               "sched:sched_wakeup",
               {}, file, &burst);
  if (HasFatalFailure()) return;
  const std::string good = read_text(file);
  const std::string damaged = temp_file("ctf-damaged");
  const std::string dir = damaged + ".ctf";
  std::mt19937_64 rng(7);
  int exported = 0, data_chunks = 0, code = 0;
  for (const auto& [off, c] : chunks_of(good)) {
    const bool meta = c.type == static_cast<uint16_t>(file::ChunkType::kKernelMeta);
    if (!meta && c.type != static_cast<uint16_t>(file::ChunkType::kKernelData)) continue;
    if (c.flags != 0 || (!meta && ++data_chunks > 2)) continue;
    const std::string payload = good.substr(off + sizeof(c), c.stored_size);
    std::vector<std::string> variants;
    std::string random(payload.size(), '\0');
    for (char& ch : random) ch = static_cast<char>(rng());
    variants.push_back(random);
    for (int v = 0; v < 6; ++v) {
      std::string p = payload;
      const uint32_t word = v % 3 == 0 ? 29 | (0xffu << 5) : v % 3 == 1 ? 0x7ffffff : ~0u;
      for (int k = 0; k < 4; ++k) {
        std::memcpy(p.data() + (rng() % (p.size() - 4) & ~size_t{3}), &word, 4);
      }
      variants.push_back(p);
    }
    for (const std::string& p : variants) {
      std::string bytes = good;
      forge(bytes, off, p);
      if (HasFatalFailure()) return;
      {
        std::ofstream o(damaged, std::ios::binary | std::ios::trunc);
        o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      }
      std::string err;
      std::string out =
          run_split(kCli + " export --format ctf -o " + dir + " " + damaged, &err, &code);
      if (code != 0) {
        EXPECT_EQ(err.rfind("nanotrace: ", 0), 0u) << err;
        EXPECT_EQ(err.find('\n'), err.size() - 1) << "one line: " << err;
        continue;
      }
      ++exported;
      out = run_split("babeltrace2 " + dir, &err, &code);
      EXPECT_EQ(code, 0) << err;
      EXPECT_NE(out.find(" test:burst: "), std::string::npos);
      for (const std::string& l : lines_of(err)) {
        EXPECT_EQ(l.rfind("WARNING: Tracer discarded ", 0), 0u) << l;
      }
    }
  }
  EXPECT_GT(exported, 0);
  run_command("rm -rf " + dir, &code);
  ::unlink(damaged.c_str());
  ::unlink(file.c_str());
}

}  // namespace
}  // namespace nanotrace
