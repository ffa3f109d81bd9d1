// Kernel events in the Perfetto export as Perfetto's own ftrace packets, against the real
// kernel: iograph on a loop device recorded with sched, block and io_uring events, exported,
// decoded with the tests' protobuf decoder and compared event by event, per CPU, with
// `dump --json` and `stats --json` of the same file; and ftrace's losses per CPU (a one-page
// buffer overflowing) in FtraceStats and "nanotrace:lost" instants; the recording kernel's
// uname(2) in SystemInfo (and in `stats --json`). The field numbers below
// are written from Perfetto's protos (protos/perfetto/trace/ftrace/*.proto), independently
// of the exporter's tables.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/utsname.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "export/protobuf_decode.hpp"
#include "kernel/kernel_fixture.hpp"

namespace nanotrace {
namespace {

using namespace kernel_test;  // NOLINT: the shared helpers
using nlohmann::json;
using testing::ChildProcess;
using testing::run_command;
namespace pb = nanotrace_export_test;

// One kernel event: as `dump --json` prints it, or as decoded from the export.
struct KernelEvent {
  uint64_t time_ns = 0;
  uint64_t pid = 0;
  std::string event;  // system:name
  json fields = json::object();
  bool operator==(const KernelEvent& o) const {
    return time_ns == o.time_ns && pid == o.pid && event == o.event && fields == o.fields;
  }
};

void PrintTo(const KernelEvent& e, std::ostream* os) {
  *os << e.time_ns << " pid " << e.pid << " " << e.event << " " << e.fields.dump();
}

// A typed message: its FtraceEvent field number and its fields (number, name, kind: 's'
// string, 'i' int32/int64, 'u' uint32/uint64).
struct Message {
  const char* event;
  uint32_t number;
  std::map<uint32_t, std::pair<std::string, char>> fields;
};

const std::vector<Message>& messages() {
  static const std::vector<Message> m = {
      {"sched:sched_switch",
       4,
       {{1, {"prev_comm", 's'}},
        {2, {"prev_pid", 'i'}},
        {3, {"prev_prio", 'i'}},
        {4, {"prev_state", 'i'}},
        {5, {"next_comm", 's'}},
        {6, {"next_pid", 'i'}},
        {7, {"next_prio", 'i'}}}},
      {"sched:sched_wakeup",
       17,
       {{1, {"comm", 's'}},
        {2, {"pid", 'i'}},
        {3, {"prio", 'i'}},
        {4, {"success", 'i'}},
        {5, {"target_cpu", 'i'}}}},
      {"sched:sched_waking",
       20,
       {{1, {"comm", 's'}},
        {2, {"pid", 'i'}},
        {3, {"prio", 'i'}},
        {4, {"success", 'i'}},
        {5, {"target_cpu", 'i'}}}},
      {"block:block_rq_issue",
       45,
       {{1, {"dev", 'u'}},
        {2, {"sector", 'u'}},
        {3, {"nr_sector", 'u'}},
        {4, {"bytes", 'u'}},
        {5, {"rwbs", 's'}},
        {6, {"comm", 's'}},
        {7, {"cmd", 's'}}}},
      {"block:block_rq_insert",
       126,
       {{1, {"dev", 'u'}},
        {2, {"sector", 'u'}},
        {3, {"nr_sector", 'u'}},
        {4, {"bytes", 'u'}},
        {5, {"rwbs", 's'}},
        {6, {"comm", 's'}},
        {7, {"cmd", 's'}}}},
      {"block:block_rq_complete",
       125,
       {{1, {"dev", 'u'}},
        {2, {"sector", 'u'}},
        {3, {"nr_sector", 'u'}},
        {4, {"errors", 'i'}},
        {5, {"rwbs", 's'}},
        {6, {"cmd", 's'}},
        {7, {"error", 'i'}}}},
  };
  return m;
}

const Message* message_of(const std::string& event) {
  for (const Message& m : messages()) {
    if (event == m.event) return &m;
  }
  return nullptr;
}

json value_of(const pb::Field& f, char kind) {
  if (kind == 's') return f.bytes;
  if (kind == 'i') return pb::as_signed(f);
  return f.varint;
}

// An FtraceEvent of the export as a KernelEvent (time_ns relative to monotonic_start); the
// system of a generic event is taken from the recording's (by its name).
::testing::AssertionResult decode_event(const std::string& bytes, uint64_t monotonic_start,
                                        const std::map<std::string, std::string>& system_of,
                                        KernelEvent* out) {
  std::vector<pb::Field> e;
  if (!pb::decode(bytes, &e)) return ::testing::AssertionFailure() << "FtraceEvent";
  const pb::Field* ts = pb::find(e, 1);
  const pb::Field* pid = pb::find(e, 2);
  if (!ts || !pid || ts->varint < monotonic_start) {
    return ::testing::AssertionFailure() << "no timestamp or pid";
  }
  out->time_ns = ts->varint - monotonic_start;
  out->pid = pid->varint;
  const pb::Field* body = nullptr;
  for (const pb::Field& f : e) {
    if (f.wire == 2) body = &f;
  }
  if (!body) return ::testing::AssertionFailure() << "no event message";
  std::vector<pb::Field> m;
  if (!pb::decode(body->bytes, &m)) return ::testing::AssertionFailure() << "event message";
  if (body->number == 327) {  // GenericFtraceEvent
    const pb::Field* name = pb::find(m, 1);
    if (!name || !system_of.count(name->bytes)) {
      return ::testing::AssertionFailure() << "generic event without a known name";
    }
    out->event = system_of.at(name->bytes) + ":" + name->bytes;
    for (const pb::Field* field : pb::find_all(m, 2)) {
      std::vector<pb::Field> fv;
      if (!pb::decode(field->bytes, &fv) || !pb::find(fv, 1)) {
        return ::testing::AssertionFailure() << "generic field";
      }
      const std::string& key = pb::find(fv, 1)->bytes;
      if (const pb::Field* s = pb::find(fv, 3)) {
        out->fields[key] = s->bytes;
      } else if (const pb::Field* i = pb::find(fv, 4)) {
        out->fields[key] = pb::as_signed(*i);
      } else if (const pb::Field* u = pb::find(fv, 5)) {
        out->fields[key] = u->varint;
      } else {
        return ::testing::AssertionFailure() << "generic field " << key << " without a value";
      }
    }
    return ::testing::AssertionSuccess();
  }
  for (const Message& msg : messages()) {
    if (msg.number != body->number) continue;
    out->event = msg.event;
    for (const pb::Field& f : m) {
      auto it = msg.fields.find(f.number);
      if (it == msg.fields.end()) return ::testing::AssertionFailure() << "field " << f.number;
      out->fields[it->second.first] = value_of(f, it->second.second);
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "unexpected FtraceEvent field " << body->number;
}

// What the export should hold of a dumped event: its fields that the message has (a generic
// event: all of them).
KernelEvent expected_of(const json& r) {
  KernelEvent e;
  e.time_ns = r["time_ns"];
  e.pid = r["tid"];
  e.event = r["event"];
  const Message* m = message_of(e.event);
  for (const auto& [key, value] : r["fields"].items()) {
    bool in_message = m == nullptr;
    if (m) {
      for (const auto& [number, field] : m->fields) in_message = in_message || field.first == key;
    }
    if (!in_message) continue;
    // A generic event's pointer is an unsigned value; dump prints it in hex.
    const bool hex =
        value.is_string() && value.get<std::string>().rfind("0x", 0) == 0 &&
        value.get<std::string>().size() > 2 &&
        value.get<std::string>().find_first_not_of("0123456789abcdef", 2) == std::string::npos;
    e.fields[key] =
        m == nullptr && hex ? json(std::stoull(value.get<std::string>(), nullptr, 16)) : value;
  }
  return e;
}

TEST(KernelTest, PerfettoExportHoldsEveryKernelEventAsPerfettoFtrace) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string file = temp_file("perfetto");
  int code = 0;
  std::string out;
  {
    LoopWorkload w("block", 100);
    ASSERT_TRUE(w.ready());
    out = w.record(
        "--kernel sched:sched_switch,sched:sched_waking,sched:sched_wakeup,"
        "block:block_rq_issue,block:block_rq_insert,block:block_rq_complete,"
        "io_uring:io_uring_complete",
        file, &code);
    ASSERT_EQ(code, 0) << out;
  }
  // What the file holds, per CPU, in order.
  std::map<uint32_t, std::vector<KernelEvent>> expected;
  std::map<std::string, std::string> system_of;  // event name -> system
  std::map<std::string, uint64_t> per_event;
  {
    std::istringstream lines(run_command(kCli + " dump --json " + file, &code));
    ASSERT_EQ(code, 0);
    std::string line;
    while (std::getline(lines, line)) {
      json r = json::parse(line);
      if (!r.contains("kernel")) continue;
      const std::string event = r["event"];
      system_of[event.substr(event.find(':') + 1)] = event.substr(0, event.find(':'));
      ++per_event[event];
      expected[r["cpu"].get<uint32_t>()].push_back(expected_of(r));
    }
  }
  // Each kind of encoding is exercised: a CPU track needs sched_switch, the block tracks
  // block requests, and io_uring has no message of its own (a generic event).
  EXPECT_GT(per_event["sched:sched_switch"], 0u);
  EXPECT_GT(per_event["block:block_rq_issue"], 0u);
  EXPECT_GT(per_event["block:block_rq_complete"], 0u);
  EXPECT_GT(per_event["io_uring:io_uring_complete"], 0u);

  out = run_command(kCli + " stats --json " + file, &code);
  ASSERT_EQ(code, 0) << out;
  const json stats = json::parse(out);
  // The recording kernel, as uname(2) names it (recorded and read on this machine).
  struct utsname uts;
  ASSERT_EQ(::uname(&uts), 0);
  ASSERT_TRUE(stats.contains("kernel")) << out;
  EXPECT_EQ(stats["kernel"], json({{"sysname", uts.sysname},
                                   {"release", uts.release},
                                   {"version", uts.version},
                                   {"machine", uts.machine}}));
  std::map<uint32_t, json> cpu_stats;  // CPU -> its stats entry
  for (const json& t : stats["threads"]) {
    const std::string name = t["name"];
    if (name.rfind("cpu", 0) == 0) cpu_stats[std::stoul(name.substr(3))] = t;
  }
  for (const auto& [cpu, events] : expected) {
    ASSERT_TRUE(cpu_stats.count(cpu)) << cpu;
    EXPECT_EQ(cpu_stats[cpu]["records"].get<uint64_t>(), events.size()) << "cpu " << cpu;
  }

  const std::string pftrace = file + ".pftrace";
  out = run_command(kCli + " export --format perfetto -o " + pftrace + " " + file + " 2>&1", &code);
  ASSERT_EQ(code, 0) << out;
  std::ifstream in(pftrace, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(pftrace.c_str());
  std::vector<pb::Field> packets;
  ASSERT_TRUE(pb::decode(bytes, &packets));

  uint64_t monotonic_start = 0, ftrace_clock_start = 0, snapshot_sequence = 0;
  std::map<uint32_t, std::vector<KernelEvent>> exported;
  std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> losses;  // phase -> per CPU
  std::set<std::pair<uint64_t, uint64_t>> tree_threads;                   // (tid, tgid)
  std::map<uint64_t, std::string> thread_names;
  std::set<uint64_t> tree_processes;
  std::vector<std::map<uint32_t, std::string>> utsnames;  // SystemInfo.utsname fields
  pb::InternTables interned;                              // user-space event names are interned
  for (const pb::Field& p : packets) {
    std::vector<pb::Field> pf;
    ASSERT_TRUE(pb::decode(p.bytes, &pf));
    interned.add_packet(pf);
    const pb::Field* sequence = pb::find(pf, 10);
    if (const pb::Field* snapshot = pb::find(pf, 6)) {
      std::vector<pb::Field> s;
      ASSERT_TRUE(pb::decode(snapshot->bytes, &s));
      for (const pb::Field* c : pb::find_all(s, 1)) {
        std::vector<pb::Field> clock;
        ASSERT_TRUE(pb::decode(c->bytes, &clock));
        if (pb::find(clock, 1)->varint == 3) monotonic_start = pb::find(clock, 2)->varint;
        if (pb::find(clock, 1)->varint == 64) ftrace_clock_start = pb::find(clock, 2)->varint;
      }
      ASSERT_TRUE(sequence);
      snapshot_sequence = sequence->varint;
    }
    if (const pb::Field* bundle = pb::find(pf, 1)) {  // ftrace_events
      ASSERT_NE(monotonic_start, 0u) << "the clock snapshot comes first";
      ASSERT_TRUE(sequence && sequence->varint == snapshot_sequence);
      std::vector<pb::Field> b;
      ASSERT_TRUE(pb::decode(bundle->bytes, &b));
      ASSERT_TRUE(pb::find(b, 1));
      ASSERT_TRUE(pb::find(b, 5));
      EXPECT_EQ(pb::find(b, 5)->varint, 2u) << "ftrace_clock: FTRACE_CLOCK_GLOBAL";
      const uint32_t cpu = static_cast<uint32_t>(pb::find(b, 1)->varint);
      for (const pb::Field* e : pb::find_all(b, 2)) {
        KernelEvent k;
        ASSERT_TRUE(decode_event(e->bytes, monotonic_start, system_of, &k));
        exported[cpu].push_back(std::move(k));
      }
    }
    if (const pb::Field* st = pb::find(pf, 34)) {  // ftrace_stats
      std::vector<pb::Field> s;
      ASSERT_TRUE(pb::decode(st->bytes, &s));
      std::vector<std::pair<uint64_t, uint64_t>>& phase = losses[pb::find(s, 1)->varint];
      for (const pb::Field* c : pb::find_all(s, 2)) {
        std::vector<pb::Field> cs;
        ASSERT_TRUE(pb::decode(c->bytes, &cs));
        const uint64_t cpu = pb::find(cs, 1)->varint;
        ASSERT_TRUE(cpu_stats.count(static_cast<uint32_t>(cpu))) << cpu;
        phase.push_back({pb::find(cs, 3)->varint, pb::find(cs, 8)->varint});
        if (pb::find(s, 1)->varint == 2) {
          EXPECT_EQ(pb::find(cs, 3)->varint, cpu_stats[cpu]["overwritten"].get<uint64_t>());
          EXPECT_EQ(pb::find(cs, 8)->varint, cpu_stats[cpu]["dropped"].get<uint64_t>());
        }
      }
    }
    if (const pb::Field* tree = pb::find(pf, 2)) {  // process_tree
      std::vector<pb::Field> t;
      ASSERT_TRUE(pb::decode(tree->bytes, &t));
      for (const pb::Field* proc : pb::find_all(t, 1)) {
        std::vector<pb::Field> pr;
        ASSERT_TRUE(pb::decode(proc->bytes, &pr));
        tree_processes.insert(pb::find(pr, 1)->varint);
      }
      for (const pb::Field* th : pb::find_all(t, 2)) {
        std::vector<pb::Field> tf;
        ASSERT_TRUE(pb::decode(th->bytes, &tf));
        tree_threads.insert({pb::find(tf, 1)->varint, pb::find(tf, 3)->varint});
        thread_names[pb::find(tf, 1)->varint] = pb::find(tf, 2)->bytes;
      }
    }
    if (const pb::Field* info = pb::find(pf, 45)) {  // system_info (system_info.proto)
      std::vector<pb::Field> si, u;
      ASSERT_TRUE(pb::decode(info->bytes, &si));
      ASSERT_TRUE(pb::find(si, 1));  // utsname
      ASSERT_TRUE(pb::decode(pb::find(si, 1)->bytes, &u));
      std::map<uint32_t, std::string>& fields = utsnames.emplace_back();
      for (const pb::Field& f : u) fields[f.number] = f.bytes;
    }
    if (const pb::Field* te = pb::find(pf, 11)) {  // no kernel event is a TrackEvent too
      std::vector<pb::Field> e;
      ASSERT_TRUE(pb::decode(te->bytes, &e));
      const std::string name = interned.event_name(e);
      EXPECT_NE(name, "?");
      EXPECT_FALSE(per_event.count(name)) << name;
    }
  }
  EXPECT_EQ(interned.error, "");
  EXPECT_EQ(ftrace_clock_start, monotonic_start) << "the ftrace clock is CLOCK_MONOTONIC";
  // One SystemInfo, with Utsname's sysname (1), version (2), release (3), machine (4).
  ASSERT_EQ(utsnames.size(), 1u);
  EXPECT_EQ(utsnames[0],
            (std::map<uint32_t, std::string>{
                {1, uts.sysname}, {2, uts.version}, {3, uts.release}, {4, uts.machine}}));
  // Every kernel event, on its CPU, in order, with its timestamp, pid and fields.
  ASSERT_EQ(exported.size(), expected.size());
  for (const auto& [cpu, events] : expected) {
    ASSERT_EQ(exported[cpu].size(), events.size()) << "cpu " << cpu;
    for (size_t i = 0; i < events.size(); ++i) {
      ASSERT_EQ(exported[cpu][i], events[i]) << "cpu " << cpu << " event " << i;
    }
  }
  // ftrace's losses: zero at the start, the file's counts at the end, for every CPU.
  ASSERT_EQ(losses[1].size(), cpu_stats.size());
  ASSERT_EQ(losses[2].size(), cpu_stats.size());
  for (const auto& [overrun, dropped] : losses[1]) EXPECT_EQ(overrun + dropped, 0u);
  // The process tree names the traced threads, in their process.
  for (const json& t : stats["threads"]) {
    const std::string name = t["name"];
    if (name.rfind("cpu", 0) == 0) continue;
    EXPECT_TRUE(tree_processes.count(t["pid"].get<uint64_t>()));
    EXPECT_TRUE(tree_threads.count({t["tid"].get<uint64_t>(), t["pid"].get<uint64_t>()}));
    EXPECT_EQ(thread_names[t["tid"].get<uint64_t>()], name);
  }
  ::unlink(file.c_str());
}

// ftrace's losses reach the export: a one-page buffer per CPU overflows under a burst of
// system calls; the END_OF_TRACE FtraceStats carry each CPU's overruns and drops as `stats`
// counts them, and each CPU with losses has its "nanotrace:lost" instant with the count.
TEST(KernelTest, PerfettoExportCarriesFtraceLossesPerCpu) {
  SKIP_WITHOUT_KERNEL_TRACING();
  ChildProcess burst({kBin + "/nanotrace_syscall_burst", "300000"}, {});
  ASSERT_EQ(burst.read_line(), "ready " + std::to_string(burst.pid()));
  const std::string file = temp_file("perfetto-lost");
  ChildProcess recorder({kCli, "record", std::to_string(burst.pid()), "--kernel",
                         "syscalls:sys_enter_getppid", "--kernel-buffer", "4", "-o", file},
                        {});
  ASSERT_TRUE(
      wait_for([&] { return capture_enabled(recorder.pid(), "syscalls/sys_enter_getppid"); }, 60));
  burst.write_line("go");
  ASSERT_EQ(burst.read_line(), "done");
  ::kill(recorder.pid(), SIGINT);
  ASSERT_EQ(recorder.wait(), 0);
  burst.close_stdin();

  int code = 0;
  std::string out = run_command(kCli + " stats --json " + file, &code);
  ASSERT_EQ(code, 0) << out;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> stats_losses;  // CPU -> overrun, dropped
  uint64_t lost = 0;
  const json stats = json::parse(out);
  for (const json& t : stats["threads"]) {
    const std::string name = t["name"];
    if (name.rfind("cpu", 0) != 0) continue;
    stats_losses[std::stoul(name.substr(3))] = {t["overwritten"], t["dropped"]};
    lost += t["lost"].get<uint64_t>();
  }
  ASSERT_GT(lost, 0u) << "a 4 KiB buffer per CPU should overflow: " << out;

  const std::string pftrace = file + ".pftrace";
  out = run_command(kCli + " export --format perfetto -o " + pftrace + " " + file + " 2>&1", &code);
  ASSERT_EQ(code, 0) << out;
  std::ifstream in(pftrace, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(pftrace.c_str());
  std::vector<pb::Field> packets;
  ASSERT_TRUE(pb::decode(bytes, &packets));
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> end_losses;
  std::map<uint64_t, std::string> track_names;    // uuid -> name
  std::map<std::string, uint64_t> lost_instants;  // track name -> count
  uint64_t generic = 0;
  for (const pb::Field& p : packets) {
    std::vector<pb::Field> pf;
    ASSERT_TRUE(pb::decode(p.bytes, &pf));
    if (const pb::Field* st = pb::find(pf, 34)) {
      std::vector<pb::Field> s;
      ASSERT_TRUE(pb::decode(st->bytes, &s));
      if (pb::find(s, 1)->varint != 2) continue;  // END_OF_TRACE
      for (const pb::Field* c : pb::find_all(s, 2)) {
        std::vector<pb::Field> cs;
        ASSERT_TRUE(pb::decode(c->bytes, &cs));
        end_losses[pb::find(cs, 1)->varint] = {pb::find(cs, 3)->varint, pb::find(cs, 8)->varint};
      }
    }
    if (const pb::Field* td = pb::find(pf, 60)) {
      std::vector<pb::Field> d;
      ASSERT_TRUE(pb::decode(td->bytes, &d));
      if (const pb::Field* name = pb::find(d, 2)) track_names[pb::find(d, 1)->varint] = name->bytes;
    }
    if (const pb::Field* te = pb::find(pf, 11)) {
      std::vector<pb::Field> e;
      ASSERT_TRUE(pb::decode(te->bytes, &e));
      const pb::Field* name = pb::find(e, 23);
      if (!name || name->bytes != "nanotrace:lost") continue;
      std::vector<pb::Field> annotation;
      ASSERT_TRUE(pb::decode(pb::find(e, 4)->bytes, &annotation));
      lost_instants[track_names[pb::find(e, 11)->varint]] = pb::find(annotation, 3)->varint;
    }
    if (const pb::Field* bundle = pb::find(pf, 1)) {
      std::vector<pb::Field> b;
      ASSERT_TRUE(pb::decode(bundle->bytes, &b));
      for (const pb::Field* e : pb::find_all(b, 2)) {
        std::vector<pb::Field> ev;
        ASSERT_TRUE(pb::decode(e->bytes, &ev));
        const pb::Field* g = pb::find(ev, 327);
        ASSERT_TRUE(g) << "a system call event is a GenericFtraceEvent";
        std::vector<pb::Field> gf;
        ASSERT_TRUE(pb::decode(g->bytes, &gf));
        EXPECT_EQ(pb::find(gf, 1)->bytes, "sys_enter_getppid");
        ++generic;
      }
    }
  }
  EXPECT_GT(generic, 0u);
  EXPECT_EQ(end_losses, stats_losses);
  for (const auto& [cpu, counts] : stats_losses) {
    const uint64_t n = counts.first + counts.second;
    const std::string track = "CPU " + std::to_string(cpu);
    if (n == 0) {
      EXPECT_FALSE(lost_instants.count(track)) << track;
    } else {
      EXPECT_EQ(lost_instants[track], n) << track;
    }
  }
  ::unlink(file.c_str());
}

}  // namespace
}  // namespace nanotrace
