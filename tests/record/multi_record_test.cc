// `nanotrace record SRC SRC... -o FILE` through the real CLI on real traced producers: several
// processes (by name:NAME, one name matching several, and by pid) into one trace file, every
// record of each there exactly once (block mode), `dump`, `stats` and `latency` naming each
// process; one exiting early while the others go on; Ctrl-C and SIGTERM ending it cleanly;
// --stop-on in any process stopping all; --kernel following every process; a bad source
// refused before anything starts.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;
using testing::kCli;
using testing::kPacedProducer;
using testing::kProducer;

const std::vector<std::string> kBlock = {"NANOTRACE_MODE=block", "NANOTRACE_BLOCK_TIMEOUT=inf",
                                         "NANOTRACE_BUFFER=64K"};

std::vector<std::string> env_with(const std::string& extra) {
  std::vector<std::string> env = kBlock;
  env.push_back(extra);
  return env;
}

// test:rec records per process, checksums and per-thread continuity checked.
struct PerProcess {
  std::map<uint32_t, uint64_t> records;  // by pid
  uint64_t bad = 0, gaps = 0;
};

PerProcess read_per_process(Trace& trace) {
  PerProcess out;
  const std::vector<ThreadInfo> threads = trace.threads();
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> next;  // (pid, producer thread) -> seq
  auto source = trace.read_all();
  Record r;
  while (source->next(&r)) {
    if (r.event->full_name() != "test:rec" || r.field_count != 4) continue;
    const uint32_t pid = r.thread < threads.size() ? threads[r.thread].pid : 0;
    const uint64_t thread = r.values[0].bits, seq = r.values[1].bits;
    if (r.values[3].bits != testing::producer_checksum(thread, seq, r.values[2].bits) ||
        r.values[2].bits != seq * 7 + thread) {
      ++out.bad;
    }
    auto [it, added] = next.emplace(std::make_pair(pid, thread), 0);
    if (it->second != seq) ++out.gaps;
    it->second = seq + 1;
    ++out.records[pid];
  }
  return out;
}

std::string drain(ChildProcess& p) {
  std::string out, line;
  while (!(line = p.read_line()).empty()) out += line + "\n";
  return out;
}

uint64_t number_after(const std::string& text, const std::string& word) {
  size_t at = text.find(word);
  return at == std::string::npos ? ~uint64_t{0} : std::stoull(text.substr(at + word.size()));
}

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

TEST(MultiRecordTest, TwoNamedProducersIntoOneFileShownByDumpStatsAndLatency) {
  const std::string tag = std::to_string(getpid());
  const std::string a_name = "mr-a-" + tag, b_name = "mr-b-" + tag;
  const std::vector<std::string> args = {kPacedProducer, "--threads", "2",       "--rate", "200000",
                                         "--seconds",    "0.4",       "--spans", "--go"};
  ChildProcess a(args, env_with("NANOTRACE_NAME=" + a_name));
  ChildProcess b(args, env_with("NANOTRACE_NAME=" + b_name));
  const pid_t pa = testing::read_pid(a), pb = testing::read_pid(b);
  ASSERT_GT(pa, 0);
  ASSERT_GT(pb, 0);
  const std::string file = testing::temp_path("two.ntr");
  ChildProcess recorder(
      {"/bin/sh", "-c",
       "exec " + kCli + " record name:" + a_name + " name:" + b_name + " -o " + file + " 2>&1"},
      {});
  ASSERT_TRUE(testing::wait_consumer(pa));
  ASSERT_TRUE(testing::wait_consumer(pb));
  a.close_stdin();
  b.close_stdin();
  const uint64_t made_a = number_after(a.read_line(), "done ");
  const uint64_t made_b = number_after(b.read_line(), "done ");
  a.wait();
  b.wait();
  const std::string out = drain(recorder);
  ASSERT_TRUE(exited_ok(recorder.wait())) << out;
  EXPECT_NE(out.find("of 2 processes"), std::string::npos) << out;
  EXPECT_NE(out.find("target exited"), std::string::npos) << out;
  EXPECT_NE(out.find("total lost 0"), std::string::npos) << out;

  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->warning(), "");
  ASSERT_EQ(trace->processes().size(), 2u);
  EXPECT_EQ(trace->processes()[0].pid, static_cast<uint32_t>(pa));
  EXPECT_EQ(trace->processes()[1].pid, static_cast<uint32_t>(pb));
  EXPECT_EQ(trace->processes()[0].user_name, a_name);
  EXPECT_EQ(trace->processes()[1].user_name, b_name);
  PerProcess got = read_per_process(*trace);
  EXPECT_EQ(got.bad, 0u);
  EXPECT_EQ(got.gaps, 0u);
  EXPECT_EQ(got.records[pa], made_a);
  EXPECT_EQ(got.records[pb], made_b);
  EXPECT_EQ(number_after(out, "recorded "), made_a + made_b + 2 * (made_a + made_b) / 256);

  int code = 0;
  // stats: every thread with its process's pid; the records of each add up.
  auto stats =
      nlohmann::json::parse(testing::run_command(kCli + " stats " + file + " --json", &code));
  ASSERT_EQ(code, 0);
  EXPECT_EQ(stats["processes"], 2);
  std::map<uint32_t, uint64_t> stat_records;
  for (const auto& t : stats["threads"]) {
    stat_records[t["pid"].get<uint32_t>()] += t["records"].get<uint64_t>();
    EXPECT_EQ(t["lost"], 0);
  }
  EXPECT_EQ(stat_records[pa], made_a + 2 * made_a / 256);
  EXPECT_EQ(stat_records[pb], made_b + 2 * made_b / 256);
  // dump: records of both pids, interleaved by time.
  std::istringstream dump(
      testing::run_command(kCli + " dump " + file + " --json -e test:span_end", &code));
  ASSERT_EQ(code, 0);
  std::map<uint32_t, uint64_t> dumped;
  for (std::string line; std::getline(dump, line);) {
    dumped[nlohmann::json::parse(line)["pid"].get<uint32_t>()]++;
  }
  EXPECT_EQ(dumped[pa], made_a / 256);
  EXPECT_EQ(dumped[pb], made_b / 256);
  // latency: the spans of both processes (ids unique across them), each paired.
  auto lat = nlohmann::json::parse(
      testing::run_command(kCli + " latency " + file +
                               " --begin test:span_begin --end test:span_end --key id --by pid "
                               "--top 5 --json",
                           &code));
  ASSERT_EQ(code, 0);
  std::map<std::string, uint64_t> by_pid;
  for (const auto& g : lat["groups"]) by_pid[g["value"].get<std::string>()] = g["count"];
  EXPECT_EQ(by_pid[std::to_string(pa)] + by_pid[std::to_string(pb)], (made_a + made_b) / 256);
  EXPECT_GT(by_pid[std::to_string(pa)], 0u);
  EXPECT_GT(by_pid[std::to_string(pb)], 0u);
  for (const auto& t : lat["top"]) {
    const uint32_t pid = t["pid"];
    EXPECT_TRUE(pid == static_cast<uint32_t>(pa) || pid == static_cast<uint32_t>(pb)) << pid;
  }
  std::remove(file.c_str());
}

TEST(MultiRecordTest, ThreeProducersOneNameForTwoOneExitsEarlyTheOthersGoOn) {
  const std::string name = "mr-many-" + std::to_string(getpid());
  ChildProcess b1({kProducer, "--threads", "1", "--forever", "--go"},
                  env_with("NANOTRACE_NAME=" + name));
  ChildProcess b2({kProducer, "--threads", "2", "--forever", "--go"},
                  env_with("NANOTRACE_NAME=" + name));
  ChildProcess early({kProducer, "--threads", "2", "--events", "20000", "--go"},
                     env_with("NANOTRACE_NAME=mr-early"));
  const pid_t p1 = testing::read_pid(b1), p2 = testing::read_pid(b2), pe = testing::read_pid(early);
  ASSERT_GT(p1, 0);
  ASSERT_GT(p2, 0);
  ASSERT_GT(pe, 0);
  const std::string file = testing::temp_path("three.ntr");
  ChildProcess recorder({"/bin/sh", "-c",
                         "exec " + kCli + " record name:" + name + " " + std::to_string(pe) +
                             " -o " + file + " 2>&1"},
                        {});
  ASSERT_TRUE(testing::wait_consumer(p1));
  ASSERT_TRUE(testing::wait_consumer(p2));
  ASSERT_TRUE(testing::wait_consumer(pe));
  b1.write_line("go");
  b2.write_line("go");
  early.write_line("go");
  ASSERT_TRUE(exited_ok(early.wait()));
  usleep(200000);  // the others go on producing after it is gone
  b1.close_stdin();
  b2.close_stdin();
  uint64_t made1 = 0, made2 = 0;
  for (std::string line; !(line = b1.read_line()).empty();) {
    made1 += number_after(line, "attempted 0 ");
  }
  for (std::string line; !(line = b2.read_line()).empty();) {
    std::istringstream in(line);
    std::string word;
    uint64_t thread = 0, n = 0;
    in >> word >> thread >> n;
    made2 += n;
  }
  b1.wait();
  b2.wait();
  const std::string out = drain(recorder);
  ASSERT_TRUE(exited_ok(recorder.wait())) << out;
  EXPECT_NE(out.find("of 3 processes"), std::string::npos) << out;
  EXPECT_NE(out.find("target exited"), std::string::npos) << out;

  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->warning(), "");
  std::set<uint32_t> pids;
  for (const ProcessInfo& p : trace->processes()) pids.insert(p.pid);
  EXPECT_EQ(pids, (std::set<uint32_t>{static_cast<uint32_t>(p1), static_cast<uint32_t>(p2),
                                      static_cast<uint32_t>(pe)}));
  PerProcess got = read_per_process(*trace);
  EXPECT_EQ(got.bad, 0u);
  EXPECT_EQ(got.gaps, 0u);
  EXPECT_EQ(got.records[pe], 40000u);
  EXPECT_EQ(got.records[p1], made1);
  EXPECT_EQ(got.records[p2], made2);
  EXPECT_GT(made1, 0u);
  EXPECT_EQ(number_after(out, "recorded "), 40000 + made1 + made2);
  // Each process's own line: records, nothing lost.
  for (pid_t p : {p1, p2, pe}) {
    EXPECT_NE(out.find("process " + std::to_string(p) + " (nanotrace_test_"), std::string::npos)
        << out;
  }
  EXPECT_NE(out.find("total lost 0"), std::string::npos) << out;
  std::remove(file.c_str());
}

TEST(MultiRecordTest, CtrlCAndSigtermEndTheRecordingCleanly) {
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    ChildProcess a({kProducer, "--threads", "1", "--forever", "--go"}, kBlock);
    ChildProcess b({kProducer, "--threads", "1", "--forever", "--go"}, kBlock);
    const pid_t pa = testing::read_pid(a), pb = testing::read_pid(b);
    ASSERT_GT(pa, 0);
    ASSERT_GT(pb, 0);
    const std::string file = testing::temp_path("sig.ntr");
    ChildProcess recorder({"/bin/sh", "-c",
                           "exec " + kCli + " record " + std::to_string(pa) + " " +
                               std::to_string(pb) + " -o " + file + " 2>&1"},
                          {});
    ASSERT_TRUE(testing::wait_consumer(pa));
    ASSERT_TRUE(testing::wait_consumer(pb));
    a.write_line("go");
    b.write_line("go");
    usleep(300000);
    kill(recorder.pid(), sig);
    const std::string out = drain(recorder);
    ASSERT_TRUE(exited_ok(recorder.wait())) << out;
    EXPECT_NE(out.find("interrupted"), std::string::npos) << out;
    a.close_stdin();
    b.close_stdin();
    a.wait();
    b.wait();
    auto trace = testing::open_ok(file);
    ASSERT_TRUE(trace);
    EXPECT_EQ(trace->warning(), "");  // an END chunk: the file is complete
    PerProcess got = read_per_process(*trace);
    EXPECT_EQ(got.bad, 0u);
    EXPECT_EQ(got.gaps, 0u);
    EXPECT_GT(got.records[pa], 0u);
    EXPECT_GT(got.records[pb], 0u);
    EXPECT_EQ(number_after(out, "recorded "), got.records[pa] + got.records[pb]);
    // Both were released: a new recorder can attach to each.
    for (pid_t p : {pa, pb}) {
      auto t = Trace::open_pid(p);
      if (t.ok()) {
        EXPECT_EQ((*t)->process().consumer_pid, 0u);
      }
    }
    std::remove(file.c_str());
  }
}

TEST(MultiRecordTest, StopOnAMatchInAnyProcessStopsThemAll) {
  ChildProcess a({kProducer, "--threads", "1", "--forever", "--go"}, kBlock);
  ChildProcess b({kProducer, "--threads", "1", "--events", "100", "--go"}, kBlock);
  const pid_t pa = testing::read_pid(a), pb = testing::read_pid(b);
  ASSERT_GT(pa, 0);
  ASSERT_GT(pb, 0);
  const std::string file = testing::temp_path("stop.ntr");
  ChildProcess recorder(
      {"/bin/sh", "-c",
       "exec " + kCli + " record " + std::to_string(pb) + " " + std::to_string(pa) +
           " --stop-on 'test:rec seq==50000' -o " + file + " 2>&1"},
      {});
  ASSERT_TRUE(testing::wait_consumer(pa));
  ASSERT_TRUE(testing::wait_consumer(pb));
  b.write_line("go");
  ASSERT_TRUE(exited_ok(b.wait()));
  a.write_line("go");  // only a reaches seq 50000, after b is gone
  const std::string out = drain(recorder);
  ASSERT_TRUE(exited_ok(recorder.wait())) << out;
  EXPECT_NE(out.find("stop-on matched"), std::string::npos) << out;
  EXPECT_NE(out.find("of process " + std::to_string(pa)), std::string::npos) << out;
  a.close_stdin();
  a.wait();
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->warning(), "");
  PerProcess got = read_per_process(*trace);
  EXPECT_EQ(got.gaps, 0u);
  EXPECT_EQ(got.records[pb], 100u);
  EXPECT_GE(got.records[pa], 50001u);
  std::remove(file.c_str());
}

TEST(MultiRecordTest, KernelEventsFollowEveryProcess) {
  ChildProcess a({kProducer, "--threads", "1", "--events", "200000", "--go"}, kBlock);
  ChildProcess b({kProducer, "--threads", "1", "--events", "200000", "--go"}, kBlock);
  const pid_t pa = testing::read_pid(a), pb = testing::read_pid(b);
  ASSERT_GT(pa, 0);
  ASSERT_GT(pb, 0);
  const std::string file = testing::temp_path("kernel.ntr");
  ChildProcess recorder({"/bin/sh", "-c",
                         "exec " + kCli + " record --kernel sched " + std::to_string(pa) + " " +
                             std::to_string(pb) + " -o " + file + " 2>&1"},
                        {});
  ASSERT_TRUE(testing::wait_consumer(pa));
  ASSERT_TRUE(testing::wait_consumer(pb));
  a.write_line("go");
  b.write_line("go");
  a.wait();
  b.wait();
  const std::string out = drain(recorder);
  ASSERT_TRUE(exited_ok(recorder.wait())) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  PerProcess got = read_per_process(*trace);
  EXPECT_EQ(got.records[pa], 200000u);
  EXPECT_EQ(got.records[pb], 200000u);
  ASSERT_FALSE(trace->kernel_events().empty());
  // Every process's producing thread ran on some CPU: sched_switch to it is in the file.
  std::map<uint64_t, uint32_t> pid_of_tid = {{pa, pa}, {pb, pb}};  // main threads too
  for (const ThreadInfo& t : trace->threads()) pid_of_tid[t.tid] = t.pid;
  std::set<uint32_t> switched_to;
  auto records = trace->read_all_with_kernel();
  Record r;
  while (records->next(&r)) {
    if (!r.event->is_kernel || r.event->full_name() != "sched:sched_switch") continue;
    for (uint32_t i = 0; i < r.field_count; ++i) {
      if (r.event->fields[i].name != "next_pid" && r.event->fields[i].name != "prev_pid") {
        continue;
      }
      auto it = pid_of_tid.find(r.values[i].bits);
      if (it != pid_of_tid.end()) switched_to.insert(it->second);
    }
  }
  EXPECT_TRUE(switched_to.count(pa)) << out;
  EXPECT_TRUE(switched_to.count(pb)) << out;
  std::remove(file.c_str());
}

TEST(MultiRecordTest, BadSourceAmongGoodOnesStopsBeforeAnythingStarts) {
  ChildProcess good({kProducer, "--threads", "1", "--events", "10", "--hold"}, kBlock);
  const pid_t pg = testing::read_pid(good);
  ASSERT_GT(pg, 0);
  ASSERT_EQ(good.read_line(), "ready");
  ChildProcess gone({"/bin/true"}, {});
  const pid_t dead = gone.pid();
  gone.wait();
  const std::string file = testing::temp_path("bad.ntr");
  const std::vector<std::string> bad_sources = {
      std::to_string(dead), "name:nobody-" + std::to_string(getpid()), "12x", "/tmp"};
  for (const std::string& bad : bad_sources) {
    SCOPED_TRACE(bad);
    const std::vector<std::string> orders = {std::to_string(pg) + " " + bad,
                                             bad + " " + std::to_string(pg)};
    for (const std::string& order : orders) {
      int code = 0;
      std::string out = testing::run_command(
          kCli + " record " + order + " -o " + file + " --duration 5 2>&1", &code);
      EXPECT_NE(code, 0) << out;
      EXPECT_EQ(out.rfind("nanotrace: ", 0), 0u) << out;
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
      struct stat st;
      EXPECT_NE(stat(file.c_str(), &st), 0) << "a file was created for " << order;
      auto t = Trace::open_pid(pg);
      ASSERT_TRUE(t.ok());
      EXPECT_EQ((*t)->process().consumer_pid, 0u);
    }
  }
  good.close_stdin();
  good.wait();
}

}  // namespace
}  // namespace nanotrace
