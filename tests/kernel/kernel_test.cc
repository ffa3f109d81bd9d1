// Kernel events in trace files, against the real kernel (root, tracefs): iograph on a loop
// device recorded with --kernel io_uring,block, joined by `breakdown` (each I/O's six times in
// stage order), shown by dump and stats; our tracefs instance removed after the recording,
// after SIGINT, and by `clean` after SIGKILL; another program's I/O beside it never joined to
// the traced one's; damaged kernel chunks read back with a warning,
// never a crash.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/file_format.hpp"
#include "common/child_process.hpp"
#include "export/protobuf_decode.hpp"
#include "kernel/kernel_fixture.hpp"
#include "nanotrace/breakdown.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using nlohmann::json;
using testing::ChildProcess;
using testing::run_command;

using namespace kernel_test;  // NOLINT: the shared helpers

TEST(KernelTest, IoStagesOfALoopDeviceAreInOrderOnOneClock) {
  SKIP_WITHOUT_KERNEL_TRACING();
  LoopWorkload w("block", 150);
  ASSERT_TRUE(w.ready());
  const std::string file = temp_file("order");
  int code = 0;
  std::string out = w.record("--kernel io_uring,block", file, &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;

  out = run_command(kCli + " breakdown --json " + file, &code);
  ASSERT_EQ(code, 0) << out;
  json b = json::parse(out);
  const uint64_t ios = b["ios"], joined = b["joined"], ordered = b["ordered"];
  EXPECT_GE(ios, 100u) << out;
  // Every I/O goes through io_uring and the loop device; a few at the edges of the capture
  // may miss a stage.
  EXPECT_GE(joined * 100, ios * 95) << out;
  EXPECT_GE(ordered * 1000, joined * 999) << out;
  ASSERT_EQ(b["stages"].size(), 6u);
  EXPECT_EQ(b["stages"][5]["count"], joined);

  // dump: kernel records by name, with their CPU, merged in time order with the user ones.
  out = run_command(kCli + " dump --json " + file, &code);
  ASSERT_EQ(code, 0);
  std::istringstream lines(out);
  std::string line;
  uint64_t kernel = 0, user = 0, last_ns = 0, issues = 0;
  bool sorted = true;
  while (std::getline(lines, line)) {
    json r = json::parse(line);
    const uint64_t t = r["time_ns"];
    sorted = sorted && t >= last_ns;
    last_ns = t;
    if (r.contains("kernel")) {
      ++kernel;
      EXPECT_TRUE(r.contains("cpu"));
      if (r["event"] == "block:block_rq_issue") {
        ++issues;
        EXPECT_TRUE(r["fields"].contains("sector"));
        EXPECT_TRUE(r["fields"].contains("rwbs"));
      }
    } else {
      ++user;
    }
  }
  EXPECT_TRUE(sorted);
  EXPECT_GT(kernel, 0u);
  EXPECT_GT(user, 0u);
  EXPECT_GE(issues, joined);

  // stats: counts per kernel event.
  out = run_command(kCli + " stats --json " + file, &code);
  ASSERT_EQ(code, 0);
  json st = json::parse(out);
  uint64_t completes = 0;
  for (const json& e : st["events"]) {
    if (e["event"] == "io_uring:io_uring_complete") completes = e["count"];
  }
  EXPECT_GE(completes, joined);
  ::unlink(file.c_str());
}

// A buffer of one page per CPU overflows: every event the kernel logged is either in the
// file or counted lost, exactly (the program makes a known number of system calls, all
// inside the capture).
// The kernel's io_uring and block events are every program's: another iograph on another
// loop device submits the same user_data (node numbers) and reads the same sectors at the same
// time. None of its events may join the traced program's I/Os.
TEST(KernelTest, AnotherProgramsIoIsNotJoinedToTheTracedOnes) {
  SKIP_WITHOUT_KERNEL_TRACING();
  LoopWorkload other;  // until killed: it runs through the whole recording
  ASSERT_TRUE(other.ready());
  LoopWorkload w("block", 150);
  ASSERT_TRUE(w.ready());
  const std::string file = temp_file("other");
  int code = 0;
  const std::string out = w.record("--kernel io_uring,block", file, &code);
  ASSERT_EQ(code, 0) << out;
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  auto tracker = IoStageTracker::create(**trace);
  ASSERT_TRUE(tracker.ok()) << tracker.status().message();
  std::vector<uint32_t> tids;
  for (const ThreadInfo& t : (*trace)->threads()) tids.push_back(t.tid);
  auto records = (*trace)->read_all_with_kernel();
  Record r;
  uint64_t foreign_submits = 0;
  while (records->next(&r)) {
    (*tracker)->add(r);
    if (r.event->full_name() == "io_uring:io_uring_submit_req" &&
        std::find(tids.begin(), tids.end(), r.task) == tids.end()) {
      ++foreign_submits;
    }
  }
  EXPECT_GT(foreign_submits, 0u) << "the other program's I/O was not in the kernel's events";
  std::set<uint64_t> rings, devices;
  size_t joined = 0, ordered = 0;
  for (const IoStages& io : (*tracker)->completed()) {
    if (io.found(1)) rings.insert(io.ring);
    if (io.found(2)) devices.insert(io.dev);
    joined += io.joined() ? 1 : 0;
    ordered += io.ordered() ? 1 : 0;
  }
  EXPECT_EQ(rings.size(), 1u);
  EXPECT_EQ(devices.size(), 1u);
  EXPECT_GE(joined, 100u);
  EXPECT_GE(ordered * 1000, joined * 999) << ordered << " of " << joined << " in stage order";
  ::unlink(file.c_str());
}

TEST(KernelTest, TinyPerCpuBufferLosesEventsAndCountsEachOne) {
  SKIP_WITHOUT_KERNEL_TRACING();
  constexpr uint64_t kCalls = 1000000;
  ChildProcess burst({kBin + "/nanotrace_syscall_burst", std::to_string(kCalls)}, {});
  ASSERT_EQ(burst.read_line(), "ready " + std::to_string(burst.pid()));
  const std::string file = temp_file("tiny");
  ChildProcess recorder({kCli, "record", std::to_string(burst.pid()), "--kernel",
                         "syscalls:sys_enter_getppid", "--kernel-buffer", "4", "-o", file},
                        {});
  // The capture is on once our instance's event is enabled.
  auto enabled = [&] {
    for (const std::string& name : instances_of(recorder.pid())) {
      std::ifstream e(std::string(kInstances) + "/" + name +
                      "/events/syscalls/sys_enter_getppid/enable");
      std::string v;
      if (e >> v && v == "1") return true;
    }
    return false;
  };
  ASSERT_TRUE(wait_for(enabled, 60));
  burst.write_line("go");
  ASSERT_EQ(burst.read_line(), "done");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(recorder.pid(), SIGINT);
  ASSERT_EQ(recorder.wait(), 0);
  burst.close_stdin();

  int code = 0;
  std::string out = run_command(kCli + " stats --json " + file, &code);
  ASSERT_EQ(code, 0) << out;
  json st = json::parse(out);
  uint64_t logged = 0, lost = 0;
  for (const json& e : st["events"]) {
    if (e["event"] == "syscalls:sys_enter_getppid") logged = e["count"];
  }
  for (const json& t : st["threads"]) {
    if (t["name"].get<std::string>().rfind("cpu", 0) == 0) lost += t["lost"].get<uint64_t>();
  }
  EXPECT_GT(lost, 0u) << "a 4 KiB buffer per CPU should overflow: " << out;
  EXPECT_GT(logged, 0u) << out;
  EXPECT_EQ(logged + lost, kCalls) << out;
  EXPECT_GE(st["lost"].get<uint64_t>(), lost);
  ::unlink(file.c_str());
}

// What cannot be captured is a one-line warning, and the user-space recording goes on: an
// event or a system this kernel lacks, and a recorder that is not root. A malformed item
// is a one-line error.
TEST(KernelTest, KernelEventsThatCannotBeCapturedAreAWarningNotAFailure) {
  SKIP_WITHOUT_KERNEL_TRACING();
  // The programs, where the user nobody can run them (the build tree may not be readable).
  char tmpl[] = "/tmp/nanotrace-kernel-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  int code = 0;
  std::string out =
      run_command("chmod 1777 " + dir + " && cp " + kCli + " " + kBin +
                      "/nanotrace_syscall_burst " + NANOTRACE_RUNTIME_LIB + " " + dir + "/ 2>&1",
                  &code);
  ASSERT_EQ(code, 0) << out;
  // `user` runs both the traced program and the recorder (empty: root).
  auto record = [&dir](const std::string& user, const std::string& kernel, int* code) {
    const std::string as_user =
        "LD_LIBRARY_PATH=" + dir + " " +
        // (Under ASan, LSAN_OPTIONS names a suppressions file that user may not read.)
        (user.empty()
             ? ""
             : "env -u LSAN_OPTIONS setpriv --reuid=" + user + " --regid=nogroup --clear-groups ");
    ChildProcess producer({"/bin/sh", "-c", as_user + dir + "/nanotrace_syscall_burst 10"}, {});
    const std::string ready = producer.read_line();
    EXPECT_EQ(ready.rfind("ready ", 0), 0u) << ready;
    const std::string file = dir + "/warned.ntr";
    ::unlink(file.c_str());
    std::string out =
        run_command(as_user + dir + "/nanotrace record " + ready.substr(6) + " --kernel " + kernel +
                        " --duration 0.5 -o " + file + " 2>&1",
                    code);
    if (*code == 0) {
      // The user-space records are in the file.
      int stats_code = 0;
      std::string stats = run_command(kCli + " stats --json " + file, &stats_code);
      EXPECT_EQ(stats_code, 0) << stats;
      if (stats_code == 0) {
        EXPECT_GE(json::parse(stats)["records"].get<uint64_t>(), 1u) << stats;
      }
    }
    ::unlink(file.c_str());
    return out;
  };
  const std::pair<std::string, std::string> cases[][2] = {
      {{"", "nosuch:event"}, {"--kernel: this kernel has no event nosuch:event", ""}},
      {{"", "block,nosuchsystem"}, {"--kernel: this kernel has no event system", ""}},
      {{"nobody", "block"}, {"--kernel needs root", ""}},
  };
  for (const auto& c : cases) {
    out = record(c[0].first, c[0].second, &code);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("nanotrace: warning: kernel events not recorded: " + c[1].first),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("recorded "), std::string::npos) << out;
  }
  out = record("", "'bad name'", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line: " << out;
  run_command("rm -rf " + dir, &code);
}

// Kernel events reach every record-by-record export: JSON lines (the objects `dump --json`
// prints), CSV rows, Chrome instants on the kernel's per-CPU tracks, Perfetto FtraceEvents in
// per-CPU bundles; each as many as `stats` counts.
TEST(KernelTest, KernelEventsReachEveryExport) {
  SKIP_WITHOUT_KERNEL_TRACING();
  LoopWorkload w("block", 100);
  ASSERT_TRUE(w.ready());
  const std::string file = temp_file("exports");
  int code = 0;
  std::string out = w.record("--kernel block:block_rq_issue,block:block_rq_complete", file, &code);
  ASSERT_EQ(code, 0) << out;
  out = run_command(kCli + " stats --json " + file, &code);
  ASSERT_EQ(code, 0) << out;
  uint64_t kernel = 0;
  const json stats = json::parse(out);
  for (const json& e : stats["events"]) {
    if (e["event"].get<std::string>().rfind("block:", 0) == 0) kernel += e["count"].get<uint64_t>();
  }
  ASSERT_GT(kernel, 0u) << out;
  auto exported = [&](const std::string& format) {
    const std::string path = file + "." + format;
    std::string said = run_command(
        kCli + " export --format " + format + " -o " + path + " " + file + " 2>&1", &code);
    EXPECT_EQ(code, 0) << said;
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ::unlink(path.c_str());
    return text;
  };
  // JSON lines: exactly dump --json.
  EXPECT_EQ(exported("jsonl"), run_command(kCli + " dump --json " + file, &code));
  // Slices and report pairs of kernel events: one line saying where kernel pairs are drawn.
  for (const std::string& cmd : {" export --format chrome -o " + file + ".slices --slice ",
                                 " report -o " + file + ".html --pair "}) {
    std::string said = run_command(
        kCli + cmd + "block:block_rq_issue,block:block_rq_complete,sector " + file + " 2>&1",
        &code);
    EXPECT_NE(code, 0) << said;
    EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
    EXPECT_NE(said.find("block:block_rq_issue is a kernel event"), std::string::npos) << said;
    EXPECT_NE(said.find("nanotrace latency"), std::string::npos) << said;
  }
  // CSV: one row per kernel event, its CPU as thread.
  {
    std::istringstream rows(exported("csv"));
    std::string row;
    uint64_t n = 0;
    while (std::getline(rows, row)) n += row.find(",block:") != std::string::npos;
    EXPECT_EQ(n, kernel);
  }
  // Chrome: instants of the kernel's pseudo-process, one track (tid) per CPU.
  {
    json chrome = json::parse(exported("chrome"));
    uint64_t n = 0;
    int64_t kernel_pid = -1;
    for (const json& e : chrome["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "kernel (ftrace)") {
        kernel_pid = e["pid"];
      }
    }
    ASSERT_GE(kernel_pid, 0);
    for (const json& e : chrome["traceEvents"]) {
      if (e["pid"] != kernel_pid || e["ph"] != "i") continue;
      ++n;
      EXPECT_EQ(e["cat"], "block");
      EXPECT_TRUE(e["args"].contains("tid"));
    }
    EXPECT_EQ(n, kernel);
    // ftrace's losses per CPU (of the CPUs whose events the file holds: one at least).
    uint64_t cpu_keys = 0;
    for (const auto& [key, count] : chrome["otherData"]["lost"].items()) {
      cpu_keys += key.rfind("cpu", 0) == 0;
    }
    EXPECT_GE(cpu_keys, 1u) << chrome["otherData"].dump();
  }
  // Perfetto: FtraceEvents in per-CPU FtraceEventBundles (perfetto_kernel_test.cc checks
  // each one).
  {
    namespace pb = nanotrace_export_test;
    std::vector<pb::Field> packets;
    ASSERT_TRUE(pb::decode(exported("perfetto"), &packets));
    uint64_t n = 0;
    for (const pb::Field& p : packets) {
      std::vector<pb::Field> pf;
      ASSERT_TRUE(pb::decode(p.bytes, &pf));
      if (const pb::Field* bundle = pb::find(pf, 1)) {
        std::vector<pb::Field> b;
        ASSERT_TRUE(pb::decode(bundle->bytes, &b));
        EXPECT_TRUE(pb::find(b, 1)) << "a bundle has its CPU";
        n += pb::find_all(b, 2).size();
      }
    }
    EXPECT_EQ(n, kernel);
  }
  // The report: the kernel events counted among the events, a row per CPU in its thread
  // table and on its timelines ("kernel cpuN").
  {
    const std::string html_path = file + ".html";
    std::string said = run_command(kCli + " report " + file + " -o " + html_path + " 2>&1", &code);
    ASSERT_EQ(code, 0) << said;
    std::ifstream in(html_path);
    std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ::unlink(html_path.c_str());
    uint64_t counted = 0;
    for (const char* name : {"block:block_rq_issue", "block:block_rq_complete"}) {
      const std::string cell = std::string("<tr><td class=\"l\">") + name + "</td><td>";
      const size_t at = html.find(cell);
      if (at != std::string::npos) counted += std::stoull(html.substr(at + cell.size()));
    }
    EXPECT_EQ(counted, kernel);
    EXPECT_NE(html.find("<td>kernel</td><td class=\"l\">cpu"), std::string::npos);
    EXPECT_NE(html.find(">kernel cpu"), std::string::npos) << "no timeline row of a CPU";
  }
  ::unlink(file.c_str());
}

TEST(KernelTest, InstanceIsRemovedAfterTheRecordingAndAfterSigint) {
  SKIP_WITHOUT_KERNEL_TRACING();
  for (bool interrupt : {false, true}) {
    // Ended by the workload's exit, or by SIGINT once it has kernel events to write.
    LoopWorkload w("block", interrupt ? 0 : 100);
    ASSERT_TRUE(w.ready());
    const std::string file = temp_file(interrupt ? "sigint" : "end");
    ChildProcess rec({kCli, "record", w.pid(), "--kernel", "block,sched", "-o", file}, {});
    ASSERT_TRUE(wait_for([&] { return capture_on(rec.pid()); }, 60));
    if (interrupt) {
      kill(rec.pid(), SIGINT);
    } else {
      kill(std::stoi(w.pid()), SIGCONT);
    }
    int status = rec.wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_TRUE(instances_of(rec.pid()).empty());
    auto t = Trace::open(file);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_FALSE((*t)->kernel_events().empty());
    ::unlink(file.c_str());
  }
}

TEST(KernelTest, CleanRemovesTheInstanceOfAKilledRecorder) {
  SKIP_WITHOUT_KERNEL_TRACING();
  LoopWorkload w;
  ASSERT_TRUE(w.ready());
  const std::string file = temp_file("killed");
  ChildProcess rec({kCli, "record", w.pid(), "--kernel", "block", "-o", file}, {});
  ASSERT_TRUE(wait_for([&] { return !instances_of(rec.pid()).empty(); }, 60));
  kill(rec.pid(), SIGKILL);
  rec.wait();
  std::vector<std::string> left = instances_of(rec.pid());
  ASSERT_EQ(left.size(), 1u) << "SIGKILL leaves the instance for clean";
  int code = 0;
  std::string out = run_command(kCli + " clean", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("removed tracefs instance " + left[0]), std::string::npos) << out;
  EXPECT_TRUE(instances_of(rec.pid()).empty());
  ::unlink(file.c_str());
}

uint64_t read_everything(const std::string& path, uint64_t* kernel_records, std::string* warning) {
  auto t = Trace::open(path);
  if (!t.ok()) return 0;
  *warning = (*t)->warning();
  auto src = (*t)->read_all_with_kernel();
  Record r;
  uint64_t n = 0;
  *kernel_records = 0;
  while (src->next(&r)) {
    // Kernel values are decoded from the (damaged) sub-buffers: format each one. User-space
    // records come from chunks the damage leaves alone: counted only (formatting them all,
    // 40 times over, made this the slowest kernel test: 54 s of release, far more in ASan).
    if (r.event->is_kernel) {
      for (uint32_t i = 0; i < r.field_count; ++i) (void)format_value(r.values[i]);
      ++*kernel_records;
    }
    ++n;
  }
  return n;
}

TEST(KernelTest, DamagedKernelChunksAreWarnedAboutNeverFatal) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string file = temp_file("damage");
  {
    LoopWorkload w("block", 100);
    ASSERT_TRUE(w.ready());
    int code = 0;
    std::string out = w.record("--kernel io_uring,block", file, &code);
    ASSERT_EQ(code, 0) << out;
  }
  std::ifstream in(file, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t kernel_good = 0;
  std::string warning;
  const uint64_t all_good = read_everything(file, &kernel_good, &warning);
  ASSERT_GT(kernel_good, 0u);
  const uint64_t user_good = all_good - kernel_good;

  std::mt19937_64 rng(42);
  const std::string damaged = temp_file("damaged");
  int forged = 0, data_chunks = 0;
  for (const auto& [off, c] : chunks_of(good)) {
    const bool meta = c.type == static_cast<uint16_t>(file::ChunkType::kKernelMeta);
    if (!meta && c.type != static_cast<uint16_t>(file::ChunkType::kKernelData)) continue;
    if (c.flags != 0 || (!meta && ++data_chunks > 2)) continue;
    const std::string payload = good.substr(off + sizeof(c), c.stored_size);
    // Random bytes, then hostile sub-buffers: an event length that points backwards, a huge
    // commit, a __data_loc field pointing outside its event.
    std::vector<std::string> variants;
    std::string random(payload.size(), '\0');
    for (char& ch : random) ch = static_cast<char>(rng());
    variants.push_back(random);
    for (int v = 0; v < 12; ++v) {
      std::string p = payload;
      const size_t at = rng() % p.size();
      const uint32_t word = v % 3 == 0 ? 29 | (0xffu << 5) : v % 3 == 1 ? 0x7ffffff : ~0u;
      std::memcpy(p.data() + (at & ~size_t{3}) % (p.size() - 4), &word, 4);
      if (!meta && v % 4 == 0) {
        uint64_t commit = 0x7ffffff;
        std::memcpy(p.data() + 8, &commit, 8);
      }
      variants.push_back(p);
    }
    for (const std::string& p : variants) {
      std::string bytes = good;
      forge(bytes, off, p);
      {
        std::ofstream o(damaged, std::ios::binary | std::ios::trunc);
        o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      }
      uint64_t kernel = 0;
      const uint64_t all = read_everything(damaged, &kernel, &warning);
      // User-space records are untouched by damage to kernel chunks.
      EXPECT_EQ(all - kernel, user_good);
      ++forged;
    }
  }
  EXPECT_GT(forged, 0);
  // A KERNEL_META that does not decode: a warning, the user records, no kernel events.
  for (const auto& [off, c] : chunks_of(good)) {
    if (c.type != static_cast<uint16_t>(file::ChunkType::kKernelMeta) || c.flags != 0) continue;
    std::string bytes = good;
    forge(bytes, off, std::string(c.stored_size, '\x01'));
    std::ofstream o(damaged, std::ios::binary | std::ios::trunc);
    o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  uint64_t kernel = 0;
  EXPECT_EQ(read_everything(damaged, &kernel, &warning), user_good);
  EXPECT_EQ(kernel, 0u);
  EXPECT_NE(warning.find("kernel"), std::string::npos) << warning;
  ::unlink(file.c_str());
  ::unlink(damaged.c_str());
}

}  // namespace
}  // namespace nanotrace
