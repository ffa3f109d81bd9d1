// `nanotrace ship` against real ClickHouse servers this test starts: two clickhouse-server
// instances as the two shards of cluster `nt` (own ports and data directories under a
// temporary directory, 127.0.0.1 only), the Distributed tables over them, and three nodes'
// traces of ship_program (one with lost records, one whose trigger fired and whose names are
// hostile). Every cookbook query of docs/clickhouse.md runs as written and its answer must
// equal `nanotrace latency` and `nanotrace stats` on the same traces, and, on a trace of a
// loop device's I/Os recorded with their kernel events (root, tracefs), `nanotrace
// breakdown`. Also: a trace shipped
// twice is stored once; a server killed mid-ship leaves nothing, and a retry stores it all;
// rows an interrupted attach left are replaced; ill-formed text is stored as valid UTF-8;
// errors are one clear line.
//
// The servers start once for the whole binary (ctest runs it as one test).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/utf8.hpp"
#include "common/child_process.hpp"
#include "kernel/kernel_fixture.hpp"  // tests/kernel
#include "nanotrace/analysis.hpp"
#include "nanotrace/breakdown.hpp"
#include "nanotrace/intervals.hpp"
#include "record/record_helpers.hpp"  // tests/record
#include "ship/clickhouse_http.hpp"
#include "ship/clickhouse_server.hpp"  // tests/ship
#include "ship/schema.hpp"

namespace nanotrace {
namespace {

using testing::ClickHouseServer;
using testing::run_command;

const std::string kBin = NANOTRACE_BIN_DIR;
const std::string kNanotrace = kBin + "/nanotrace";
const char kPair[] = "io:submit -> io:complete by req";
// The third node's name as given on the command line: ill-formed UTF-8 (printf's \377).
const char kHostileNode[] = "node-c\xff";

using Rows = std::vector<std::vector<std::string>>;

// Rows of a TabSeparated answer (no value of the queries below holds an escaped character
// but the hostile names, which are read as hex).
Rows parse_tsv(const std::string& text) {
  Rows rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> row;
    size_t at = 0;
    for (;;) {
      size_t tab = line.find('\t', at);
      row.push_back(line.substr(at, tab == std::string::npos ? tab : tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    rows.push_back(row);
  }
  return rows;
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// The cookbook query named `name` in docs/clickhouse.md, as written there.
std::string cookbook(const std::string& name) {
  std::ifstream in(std::string(NANOTRACE_SOURCE_DIR) + "/docs/clickhouse.md");
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  const std::string marker = "```sql\n-- cookbook: " + name + "\n";
  size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  at += marker.size();
  return text.substr(at, text.find("```", at) - at);
}

nlohmann::json run_json(const std::string& command) {
  int code = 0;
  std::string out = run_command(command, &code);
  EXPECT_EQ(code, 0) << command << "\n" << out;
  return nlohmann::json::parse(out, nullptr, false);
}

// Runs ship_program with env and args to completion and recovers its trace into file
// (`nanotrace recover` with recover_env: NANOTRACE_NODE_NAME and the like name its node).
std::string make_trace(const std::string& env, const std::string& args, const std::string& file,
                       const std::string& recover_env = "") {
  std::string out;
  std::string segment =
      testing::run_keeping_segment(env + " " + kBin + "/ship_program " + args, &out);
  if (segment.empty()) return "ship_program failed: " + out;
  int code = 0;
  out = run_command(
      recover_env + " " + kNanotrace + " recover " + segment + " -o " + file + " 2>&1", &code);
  unlink(segment.c_str());
  return code == 0 ? "" : "recover failed: " + out;
}

struct Shipped {
  std::string node;  // as stored (valid UTF-8)
  std::string file;
  nlohmann::json report;  // ship --json
};

class ShipTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/nanotrace-ship-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    const int tcp[2] = {testing::free_port(), testing::free_port()};
    for (int s = 0; s < 2; ++s) {
      shards_[s] = std::make_unique<ClickHouseServer>(dir_ + "/shard" + std::to_string(s),
                                                      testing::free_port(), tcp[s]);
      shards_[s]->configure({tcp[0], tcp[1]});
      if (!shards_[s]->start(&setup_error_)) return;
    }
    struct Node {
      std::string name, env, args;
    } nodes[] = {
        {"node-a", "NANOTRACE_BUFFER=16M", "--pairs 4000"},
        // Rings of 64 KiB for 30000 records per thread: the oldest are overwritten.
        {"node-b", "NANOTRACE_BUFFER=64K", "--pairs 60000"},
        {kHostileNode, "NANOTRACE_BUFFER=16M NANOTRACE_TRIGGER='io:complete req==1000500'",
         "--pairs 3000 --hostile"},
    };
    for (const Node& n : nodes) {
      Shipped s;
      s.node = utf8::valid(n.name);
      s.file = dir_ + "/" + s.node.substr(0, 6) + ".ntr";
      if (std::string e = make_trace(n.env, n.args, s.file); !e.empty()) {
        setup_error_ = e;
        return;
      }
      std::string error;
      s.report = ship(s.file, "--node \"$(printf '" + escape_for_printf(n.name) + "')\"", &error);
      if (!error.empty()) {
        setup_error_ = error;
        return;
      }
      shipped_.push_back(s);
    }
  }

  static void TearDownTestSuite() {
    for (auto& s : shards_) s.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void SetUp() override {
    if (!setup_error_.empty()) GTEST_FAIL() << setup_error_;
  }

  // `name` for printf's format: bytes beyond ASCII as \ooo.
  static std::string escape_for_printf(const std::string& name) {
    std::string out;
    for (unsigned char c : name) {
      if (c < 0x80 && c != '\\' && c != '\'' && c != '%') {
        out.push_back(static_cast<char>(c));
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\%03o", c);
        out += buf;
      }
    }
    return out;
  }

  // Ships file into both shards with `extra` options; the JSON report, or *error.
  static nlohmann::json ship(const std::string& file, const std::string& extra,
                             std::string* error) {
    const std::string command = kNanotrace + " ship " + file + " --clickhouse " +
                                shards_[0]->url() + " --clickhouse " + shards_[1]->url() +
                                " --cluster nt --json " + extra + " 2>&1";
    int code = 0;
    std::string out = run_command(command, &code);
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    if (code != 0 || j.is_discarded()) *error = "ship failed: " + command + "\n" + out;
    return j;
  }

  // Rows of a query on shard 0 (the Distributed tables span both).
  static Rows query(const std::string& sql) {
    auto answer = shards_[0]->client()->query(sql);
    EXPECT_TRUE(answer.ok()) << answer.status().message() << "\n" << sql;
    return answer.ok() ? parse_tsv(*answer) : Rows{};
  }

  // The cookbook query `name` on database db instead of nanotrace.
  static Rows query_cookbook(const std::string& name, const std::string& db) {
    std::string sql = cookbook(name);
    for (size_t at; (at = sql.find("nanotrace.")) != std::string::npos;) {
      sql.replace(at, 9, db);
    }
    return query(sql);
  }

  static uint64_t count(ClickHouseServer& server, const std::string& sql) {
    auto n = server.client()->query_count(sql);
    EXPECT_TRUE(n.ok()) << n.status().message() << "\n" << sql;
    return n.ok() ? *n : ~0ull;
  }

  static const Shipped& node(size_t i) { return shipped_[i]; }

  static inline std::string dir_;
  static inline std::unique_ptr<ClickHouseServer> shards_[2];
  static inline std::vector<Shipped> shipped_;
  static inline std::string setup_error_;
};

TEST_F(ShipTest, LatencyPerNodeEqualsLatencyCommand) {
  Rows rows = query(cookbook("latency_per_node"));
  ASSERT_EQ(rows.size(), 3u);
  for (const Shipped& s : shipped_) {
    nlohmann::json cli = run_json(kNanotrace + " latency " + s.file +
                                  " --begin io:submit --end io:complete --key req --json");
    const nlohmann::json& all = cli["overall"];
    bool found = false;
    for (const auto& row : rows) {
      if (row[0] != s.node || row[1] != kPair) continue;
      found = true;
      EXPECT_EQ(std::stoull(row[2]), all["count"].get<uint64_t>()) << s.node;
      EXPECT_EQ(std::stoull(row[3]), all["min_ns"].get<uint64_t>()) << s.node;
      EXPECT_EQ(std::stoull(row[4]), all["p50_ns"].get<uint64_t>()) << s.node;
      EXPECT_EQ(std::stoull(row[5]), all["p99_ns"].get<uint64_t>()) << s.node;
      EXPECT_EQ(std::stoull(row[6]), all["p999_ns"].get<uint64_t>()) << s.node;
      EXPECT_EQ(std::stoull(row[7]), all["max_ns"].get<uint64_t>()) << s.node;
    }
    EXPECT_TRUE(found) << s.node;
  }
}

// Per minute: the analysis layer's pairs (the matcher `latency` uses) grouped by the minute of
// their begin record, with `latency`'s statistics (compute_latency_stats) per minute.
TEST_F(ShipTest, LatencyPerMinuteEqualsAnalysis) {
  Rows rows = query(cookbook("latency_per_minute"));
  size_t compared = 0;
  for (const Shipped& s : shipped_) {
    auto trace = Trace::open(s.file);
    ASSERT_TRUE(trace.ok()) << trace.status().message();
    auto rule = resolve_pair_with_kernel(**trace, {"io:submit", "io:complete", "req"});
    ASSERT_TRUE(rule.ok()) << rule.status().message();
    IntervalMatcher matcher({*rule});
    std::map<uint64_t, std::vector<uint64_t>> minutes;
    auto records = (*trace)->read_all_with_kernel();
    Record r;
    while (records->next(&r)) {
      for (const IntervalMatch& m : matcher.add(r)) {
        if (m.kind != IntervalMatch::Kind::kEnd) continue;
        const uint64_t begin = (*trace)->time_origin().realtime_ns + m.interval.begin_ns;
        minutes[begin / 60000000000ull].push_back(m.interval.latency_ns());
      }
    }
    ASSERT_FALSE(minutes.empty());
    for (auto& [minute, latencies] : minutes) {
      LatencyStats want = compute_latency_stats(&latencies);
      bool found = false;
      for (const auto& row : rows) {
        if (row[0] != s.node || row[1] != kPair || std::stoull(row[2]) != minute) continue;
        found = true;
        ++compared;
        EXPECT_EQ(std::stoull(row[4]), want.count) << s.node << " minute " << minute;
        EXPECT_EQ(std::stoull(row[5]), want.p50_ns) << s.node << " minute " << minute;
        EXPECT_EQ(std::stoull(row[6]), want.p99_ns) << s.node << " minute " << minute;
        EXPECT_EQ(std::stoull(row[7]), want.p999_ns) << s.node << " minute " << minute;
      }
      EXPECT_TRUE(found) << s.node << " minute " << minute;
    }
  }
  EXPECT_EQ(compared, rows.size());
}

TEST_F(ShipTest, CountsAndLossesEqualStatsCommand) {
  Rows events = query(cookbook("events_per_node"));
  Rows losses = query(cookbook("loss_per_node"));
  Rows causes = query(cookbook("loss_by_cause"));
  ASSERT_EQ(losses.size(), 3u);
  size_t event_rows = 0;
  for (const Shipped& s : shipped_) {
    nlohmann::json cli = run_json(kNanotrace + " stats " + s.file + " --json");
    for (const auto& e : cli["events"]) {
      bool found = false;
      for (const auto& row : events) {
        if (row[0] != s.node || row[1] != e["event"].get<std::string>()) continue;
        found = true;
        EXPECT_EQ(std::stoull(row[2]), e["count"].get<uint64_t>()) << s.node << " " << row[1];
      }
      EXPECT_TRUE(found) << s.node << " " << e["event"];
      ++event_rows;
    }
    uint64_t overwritten = 0;
    for (const auto& t : cli["threads"]) overwritten += t["overwritten"].get<uint64_t>();
    uint64_t stored_overwritten = 0;
    for (const auto& row : causes) {
      if (row[0] == s.node && row[1] == "overwritten") stored_overwritten += std::stoull(row[7]);
    }
    EXPECT_EQ(stored_overwritten, overwritten) << s.node;
    for (const auto& row : losses) {
      if (row[0] != s.node) continue;
      EXPECT_EQ(row[1], "1") << s.node;
      EXPECT_EQ(std::stoull(row[3]), cli["lost"].get<uint64_t>()) << s.node;
    }
  }
  EXPECT_EQ(event_rows, events.size());
  // node-b's rings wrapped: the comparison above covered real losses.
  EXPECT_EQ(losses[1][0], "node-b");
  EXPECT_GT(std::stoull(losses[1][3]), 0u);
}

TEST_F(ShipTest, TriggerTracesSayWhereItFired) {
  Rows traces = query(cookbook("trigger_traces"));
  ASSERT_EQ(traces.size(), 1u);
  const Shipped& c = node(2);
  auto trace = Trace::open(c.file);
  ASSERT_TRUE(trace.ok());
  const TriggerInfo& t = (*trace)->process().trigger;
  ASSERT_NE(t.state, abi::TriggerState::kArmed);
  EXPECT_EQ(traces[0][0], c.node);
  EXPECT_EQ(traces[0][1], std::to_string(c.report["trace_id"].get<std::string>().empty()
                                             ? 0
                                             : std::stoull(c.report["trace_id"].get<std::string>(),
                                                           nullptr, 16)));
  EXPECT_EQ(traces[0][2], trigger_state_name(t.state));
  EXPECT_EQ(traces[0][3], "io:complete req==1000500");
  EXPECT_EQ(traces[0][4], "io:complete");
  EXPECT_EQ(std::stoull(traces[0][5]), (*trace)->process().pid);
  EXPECT_EQ(std::stoull(traces[0][6]), t.tid);
  EXPECT_EQ(std::stoull(traces[0][7]), t.seq);
  EXPECT_EQ(std::stoull(traces[0][8]), (*trace)->ticks_to_realtime_ns(t.ticks));
  // The record that fired it: io:complete of request 1000500, on that thread.
  Rows fired = query(cookbook("trigger_records"));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0][2], "io:complete");
  EXPECT_EQ(std::stoull(fired[0][4]), t.tid);
  EXPECT_EQ(fired[0][8], "['req']");
  EXPECT_EQ(fired[0][9], "[1000500]");
}

TEST_F(ShipTest, SlowestPairsAreTheTrueSlowest) {
  Rows slow = query(cookbook("slowest_pairs"));
  ASSERT_EQ(slow.size(), 20u);
  uint64_t max = 0;
  for (const Shipped& s : shipped_) {
    nlohmann::json cli = run_json(kNanotrace + " latency " + s.file +
                                  " --begin io:submit --end io:complete --key req --json");
    max = std::max(max, cli["overall"]["max_ns"].get<uint64_t>());
  }
  EXPECT_EQ(std::stoull(slow[0][2]), max);
  for (size_t i = 1; i < slow.size(); ++i) {
    EXPECT_LE(std::stoull(slow[i][2]), std::stoull(slow[i - 1][2]));
  }
}

// A trace goes whole to shard trace_id % 2; the other shard holds none of it.
TEST_F(ShipTest, EachTraceLivesWholeOnItsShard) {
  for (const Shipped& s : shipped_) {
    const uint64_t id = std::stoull(s.report["trace_id"].get<std::string>(), nullptr, 16);
    const std::string where = " WHERE trace_id = " + std::to_string(id);
    ClickHouseServer& home = *shards_[id % 2];
    ClickHouseServer& other = *shards_[1 - id % 2];
    EXPECT_EQ(s.report["server"].get<std::string>(), home.url() + "/");
    EXPECT_EQ(count(home, "SELECT count() FROM nanotrace.events_local" + where),
              s.report["events"].get<uint64_t>());
    EXPECT_EQ(count(home, "SELECT count() FROM nanotrace.intervals_local" + where),
              s.report["intervals"].get<uint64_t>());
    EXPECT_EQ(count(home, "SELECT count() FROM nanotrace.traces_local" + where), 1u);
    EXPECT_EQ(count(other, "SELECT count() FROM nanotrace.events_local" + where), 0u);
    EXPECT_EQ(count(other, "SELECT count() FROM nanotrace.traces_local" + where), 0u);
  }
  for (auto& shard : shards_) {
    EXPECT_EQ(count(*shard, "SELECT count() FROM system.tables WHERE name LIKE '\\\\_stage%'"), 0u);
  }
}

TEST_F(ShipTest, ShippingTwiceStoresOnce) {
  const Shipped& a = node(0);
  const uint64_t before = count(*shards_[0], "SELECT count() FROM nanotrace.events");
  std::string error;
  nlohmann::json again = ship(a.file, "--node node-a", &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(again["already_stored"].get<bool>());
  EXPECT_EQ(again["trace_id"], a.report["trace_id"]);
  EXPECT_EQ(count(*shards_[0], "SELECT count() FROM nanotrace.events"), before);
  EXPECT_EQ(count(*shards_[0], "SELECT count() FROM nanotrace.traces WHERE node = 'node-a'"), 1u);
}

// The hostile trace's names and strings come back as the reader's text made valid, byte for
// byte (read as hex, so that no escaping is involved).
TEST_F(ShipTest, IllFormedTextIsStoredAsValidUtf8) {
  const Shipped& c = node(2);
  auto trace = Trace::open(c.file);
  ASSERT_TRUE(trace.ok());
  std::set<std::string> want_threads;
  bool ill_formed = false;
  for (const ThreadInfo& t : (*trace)->threads()) {
    want_threads.insert(utf8::valid(t.name));
    ill_formed = ill_formed || !utf8::is_valid(t.name);
  }
  ASSERT_TRUE(ill_formed) << "the hostile trace's thread names are all valid: nothing tested";
  const std::string where = " WHERE node = unhex('" + [&] {
    std::string hex;
    for (unsigned char ch : c.node) hex += fmt::format("{:02X}", ch);
    return hex;
  }() + "')";
  std::set<std::string> threads;
  for (const auto& row : query("SELECT DISTINCT hex(thread) FROM nanotrace.events" + where)) {
    threads.insert(unhex(row[0]));
  }
  EXPECT_EQ(threads, want_threads);
  Rows names = query("SELECT DISTINCT hex(process), hex(node) FROM nanotrace.events" + where);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(unhex(names[0][0]), utf8::valid((*trace)->process().process_name));
  EXPECT_EQ(unhex(names[0][1]), "node-c\xef\xbf\xbd");
  Rows devs = query(
      "SELECT DISTINCT hex(str_values[indexOf(str_keys, 'dev')]) FROM "
      "nanotrace.events" +
      where + " AND event = 'io:submit'");
  ASSERT_EQ(devs.size(), 1u);
  const std::string dev = unhex(devs[0][0]);
  EXPECT_TRUE(utf8::is_valid(dev));
  EXPECT_EQ(dev, utf8::valid("dev\xc3(\xed\xa0\x80'\"\\\n\t;--\xf0\x9f\x98"));
  // Every text column of every node, and every string value (18.16 has no isValidUTF8).
  for (const std::string column :
       {"thread", "process", "node", "event", "arrayJoin(str_values)", "arrayJoin(str_keys)"}) {
    Rows all = query("SELECT DISTINCT hex(" + column + ") FROM nanotrace.events");
    ASSERT_FALSE(all.empty()) << column;
    for (const auto& row : all) EXPECT_TRUE(utf8::is_valid(unhex(row[0]))) << column;
  }
}

// Rows an interrupted attach left (the trace's partitions attached, its traces row missing)
// are deleted before the trace is stored again: its counts come out exact, not doubled.
TEST_F(ShipTest, RowsOfAnInterruptedAttachAreReplaced) {
  const Shipped& a = node(0);
  const std::string one = " --clickhouse " + shards_[0]->url() + " --database interrupted";
  int code = 0;
  std::string out =
      run_command(kNanotrace + " ship " + a.file + one + " --node node-a --json", &code);
  ASSERT_EQ(code, 0) << out;
  nlohmann::json first = nlohmann::json::parse(out);
  const uint64_t id = std::stoull(first["trace_id"].get<std::string>(), nullptr, 16);
  auto c = shards_[0]->client();
  ASSERT_TRUE(
      c->query("ALTER TABLE interrupted.traces_local DELETE WHERE trace_id = " + std::to_string(id))
          .ok());
  for (int i = 0; i < 400 && count(*shards_[0],
                                   "SELECT count() FROM system.mutations WHERE "
                                   "database = 'interrupted' AND is_done = 0") > 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(count(*shards_[0], "SELECT count() FROM interrupted.traces_local"), 0u);
  out = run_command(kNanotrace + " ship " + a.file + one + " --node node-a --json", &code);
  ASSERT_EQ(code, 0) << out;
  nlohmann::json second = nlohmann::json::parse(out);
  EXPECT_FALSE(second["already_stored"].get<bool>());
  EXPECT_EQ(second["replaced_rows"].get<uint64_t>(),
            first["events"].get<uint64_t>() + first["intervals"].get<uint64_t>() +
                first["ios"].get<uint64_t>() + first["losses"].get<uint64_t>());
  EXPECT_EQ(count(*shards_[0], "SELECT count() FROM interrupted.events_local"),
            first["events"].get<uint64_t>());
  EXPECT_EQ(count(*shards_[0], "SELECT count() FROM interrupted.intervals_local"),
            first["intervals"].get<uint64_t>());
  EXPECT_EQ(count(*shards_[0], "SELECT count() FROM interrupted.traces_local"), 1u);
}

// The server dies while a trace is being staged: the shipper says so in one line, nothing of
// the trace is stored, and shipping it again once the server is back stores all of it. The
// shipper is stopped (SIGSTOP) once staged rows show, the server killed, the shipper resumed:
// its next request meets a dead connection, whatever the machine's speed.
TEST_F(ShipTest, ServerKilledMidShipStoresNothingThenRetryStoresAll) {
  const std::string file = dir_ + "/big.ntr";
  ASSERT_EQ(make_trace("NANOTRACE_BUFFER=64M", "--pairs 100000", file), "");
  ClickHouseServer server(dir_ + "/killed", testing::free_port(), testing::free_port());
  server.configure({});
  std::string why;
  ASSERT_TRUE(server.start(&why)) << why;
  const std::string log = dir_ + "/killed-ship.log";
  pid_t shipper = fork();
  if (shipper == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(kNanotrace.c_str(), "nanotrace", "ship", file.c_str(), "--clickhouse",
          server.url().c_str(), "--batch-rows", "2000", "--node", "node-k", nullptr);
    _exit(127);
  }
  const std::string staged =
      "SELECT count() FROM system.parts WHERE database = 'nanotrace' AND table LIKE "
      "'\\\\_stage%' AND active";
  bool seen = false;
  for (int i = 0; i < 3000 && !seen; ++i) {
    auto n = server.client()->query_count(staged);
    seen = n.ok() && *n > 0;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(shipper, SIGSTOP);
  ASSERT_TRUE(seen) << "no staged rows seen";
  EXPECT_EQ(count(server, "SELECT count() FROM nanotrace.traces_local"), 0u);
  server.kill_now();
  kill(shipper, SIGCONT);
  int status = 0;
  waitpid(shipper, &status, 0);
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_NE(output.find("nothing of it is stored"), std::string::npos) << output;
  EXPECT_NE(output.find("ClickHouse at " + server.url()), std::string::npos) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;

  ASSERT_TRUE(server.start(&why)) << why;
  EXPECT_EQ(count(server, "SELECT count() FROM nanotrace.traces_local"), 0u);
  EXPECT_EQ(count(server, "SELECT count() FROM nanotrace.events_local"), 0u);
  EXPECT_EQ(count(server, "SELECT count() FROM nanotrace.intervals_local"), 0u);
  EXPECT_EQ(count(server, "SELECT count() FROM nanotrace.losses_local"), 0u);
  int code = 0;
  std::string out = run_command(kNanotrace + " ship " + file + " --clickhouse " + server.url() +
                                    " --batch-rows 2000 --node node-k --json 2>&1",
                                &code);
  ASSERT_EQ(code, 0) << out;
  nlohmann::json report = nlohmann::json::parse(out);
  nlohmann::json stats = run_json(kNanotrace + " stats " + file + " --json");
  uint64_t records = 0;
  for (const auto& e : stats["events"]) records += e["count"].get<uint64_t>();
  EXPECT_EQ(report["events"].get<uint64_t>(), records);
  EXPECT_EQ(report["intervals"].get<uint64_t>(), 100000u);
  EXPECT_EQ(count(server, "SELECT count() FROM nanotrace.events_local"), records);
  EXPECT_EQ(count(server, "SELECT count() FROM nanotrace.intervals_local"), 100000u);
  EXPECT_EQ(count(server, "SELECT count() FROM nanotrace.traces_local"), 1u);
  EXPECT_EQ(count(server, "SELECT count() FROM system.tables WHERE name LIKE '\\\\_stage%'"), 0u);
}

TEST_F(ShipTest, ErrorsAreOneClearLine) {
  const std::string file = node(0).file;
  int code = 0;
  // Nothing listens there.
  const std::string nowhere = "http://127.0.0.1:" + std::to_string(testing::free_port());
  std::string out =
      run_command(kNanotrace + " ship " + file + " --clickhouse " + nowhere + " 2>&1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("ClickHouse at " + nowhere), std::string::npos) << out;
  EXPECT_EQ(out.rfind("nanotrace: ", 0), 0u) << out;
  // The server refuses: an unknown cluster.
  out = run_command(kNanotrace + " ship " + file + " --clickhouse " + shards_[0]->url() +
                        " --database refused --cluster nosuch 2>&1",
                    &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("nosuch"), std::string::npos) << out;
  // Not a trace: the others are still shipped, the status is 1.
  const std::string junk = dir_ + "/junk.ntr";
  std::ofstream(junk) << "not a trace";
  out = run_command(kNanotrace + " ship " + junk + " " + file + " --clickhouse " +
                        shards_[0]->url() + " --database junk --json 2>&1",
                    &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("\"already_stored\":false"), std::string::npos) << out;
}

// A merged fleet trace (`nanotrace merge` of three nodes' files, aligned through
// CLOCK_REALTIME: another boot id each) ships each process's rows under its node and one
// traces row per node with the merge's alignment, error bound and trigger origin. Counts per
// node equal `stats` and `latency` on each node's own file; percentiles per node equal the
// analysis layer's on the merged file split by node (the alignment maps each node's clock onto
// the reference's, so a latency may differ by a rounding from the node's own file).
TEST_F(ShipTest, MergedFleetTraceShipsEachNode) {
  std::vector<std::string> files;
  for (int n = 1; n <= 3; ++n) {
    const std::string file = dir_ + "/fleet-" + std::to_string(n) + ".ntr";
    const std::string env =
        n == 2 ? "NANOTRACE_BUFFER=16M NANOTRACE_TRIGGER='io:complete req==21000300'"
               : "NANOTRACE_BUFFER=16M";
    ASSERT_EQ(make_trace(env, "--pairs 2000 --req-base " + std::to_string(n) + "0000000", file,
                         "NANOTRACE_NODE_NAME=fleet-" + std::to_string(n) +
                             " NANOTRACE_NODE_BOOT_ID=fleet-boot-" + std::to_string(n)),
              "");
    files.push_back(file);
  }
  const std::string merged = dir_ + "/fleet.ntr";
  int code = 0;
  std::string out = run_command(kNanotrace + " merge " + files[0] + " " + files[1] + " " +
                                    files[2] + " -o " + merged + " 2>&1",
                                &code);
  ASSERT_EQ(code, 0) << out;
  std::string error;
  nlohmann::json report = ship(merged, "--database fleet", &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(report["nodes"], nlohmann::json({"fleet-1", "fleet-2", "fleet-3"}));
  auto fleet_query = [&](const std::string& name) { return query_cookbook(name, "fleet"); };
  auto trace = Trace::open(merged);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_EQ((*trace)->nodes().size(), 3u);

  // Latency per node: the merged file's pairs split by the begin record's node.
  auto rule = resolve_pair_with_kernel(**trace, {"io:submit", "io:complete", "req"});
  ASSERT_TRUE(rule.ok());
  IntervalMatcher matcher({*rule});
  std::vector<std::vector<uint64_t>> latencies(3);
  auto records = (*trace)->read_all_with_kernel();
  Record r;
  while (records->next(&r)) {
    for (const IntervalMatch& m : matcher.add(r)) {
      if (m.kind != IntervalMatch::Kind::kEnd) continue;
      const ThreadInfo& t = records->threads()[m.interval.begin_thread].info;
      latencies[(*trace)->processes()[t.process].node].push_back(m.interval.latency_ns());
    }
  }
  Rows rows = fleet_query("latency_per_node");
  ASSERT_EQ(rows.size(), 3u);
  for (size_t n = 0; n < 3; ++n) {
    nlohmann::json own = run_json(kNanotrace + " latency " + files[n] +
                                  " --begin io:submit --end io:complete --key req --json");
    LatencyStats want = compute_latency_stats(&latencies[n]);
    EXPECT_EQ(rows[n][0], "fleet-" + std::to_string(n + 1));
    EXPECT_EQ(std::stoull(rows[n][2]), own["overall"]["count"].get<uint64_t>());
    EXPECT_EQ(std::stoull(rows[n][2]), want.count);
    EXPECT_EQ(std::stoull(rows[n][3]), want.min_ns);
    EXPECT_EQ(std::stoull(rows[n][4]), want.p50_ns);
    EXPECT_EQ(std::stoull(rows[n][5]), want.p99_ns);
    EXPECT_EQ(std::stoull(rows[n][6]), want.p999_ns);
    EXPECT_EQ(std::stoull(rows[n][7]), want.max_ns);
  }
  // Counts and losses per node: each node's own file's `stats`.
  Rows events = fleet_query("events_per_node");
  Rows losses = fleet_query("loss_per_node");
  ASSERT_EQ(losses.size(), 3u);
  for (size_t n = 0; n < 3; ++n) {
    nlohmann::json own = run_json(kNanotrace + " stats " + files[n] + " --json");
    const std::string node = "fleet-" + std::to_string(n + 1);
    size_t seen = 0;
    for (const auto& e : own["events"]) {
      for (const auto& row : events) {
        if (row[0] != node || row[1] != e["event"].get<std::string>()) continue;
        ++seen;
        EXPECT_EQ(std::stoull(row[2]), e["count"].get<uint64_t>()) << node << " " << row[1];
      }
    }
    EXPECT_EQ(seen, own["events"].size()) << node;
    EXPECT_EQ(losses[n][0], node);
    EXPECT_EQ(losses[n][1], "1");
    EXPECT_EQ(std::stoull(losses[n][3]), own["lost"].get<uint64_t>()) << node;
  }
  // Each node's identity, alignment and error bound as the merge put them.
  Rows nodes = query(
      "SELECT node, boot_id, alignment, clock_error_bound_ns FROM fleet.traces ORDER BY node");
  ASSERT_EQ(nodes.size(), 3u);
  for (size_t n = 0; n < 3; ++n) {
    const NodeInfo& info = (*trace)->nodes()[n];
    EXPECT_EQ(nodes[n][0], info.hostname);
    EXPECT_EQ(nodes[n][1], info.boot_id);
    EXPECT_EQ(nodes[n][2], info.alignment);
    EXPECT_EQ(std::stoull(nodes[n][3]), info.error_bound_ns);
  }
  // The trigger fired on fleet-2: its origin, and the record.
  Rows fired = fleet_query("trigger_traces");
  ASSERT_EQ(fired.size(), 1u);
  const NodeInfo& origin = (*trace)->nodes()[1];
  ASSERT_TRUE(origin.has_origin);
  EXPECT_EQ(fired[0][0], "fleet-2");
  EXPECT_EQ(fired[0][4], origin.origin_event);
  EXPECT_EQ(std::stoull(fired[0][5]), origin.origin_pid);
  EXPECT_EQ(std::stoull(fired[0][6]), origin.origin_tid);
  EXPECT_EQ(std::stoull(fired[0][7]), origin.origin_seq);
  Rows record = fleet_query("trigger_records");
  ASSERT_EQ(record.size(), 1u);
  EXPECT_EQ(record[0][0], "fleet-2");
  EXPECT_EQ(record[0][9], "[21000300]");
  // A node name for a trace of several nodes is refused.
  out = run_command(kNanotrace + " ship " + merged + " --clickhouse " + shards_[0]->url() +
                        " --database fleet2 --node x 2>&1",
                    &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("records 3 nodes"), std::string::npos) << out;
}

// A trace of two processes that each lost records for want of a thread slot (`record PID
// PID`): the loss cookbook's answers equal `stats`, every process's losses counted.
TEST_F(ShipTest, LossesOfEveryProcessEqualStatsCommand) {
  const std::string file = dir_ + "/two-lossy.ntr";
  ASSERT_EQ(testing::record_two_lossy_processes(file), "");
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_EQ((*trace)->processes().size(), 2u);
  for (const ProcessInfo& p : (*trace)->processes()) {
    ASSERT_GT(p.lost_no_slot + p.lost_reclaimed, 0u) << "pid " << p.pid;
  }
  std::string error;
  ship(file, "--database lossy --node lossy-node", &error);
  ASSERT_TRUE(error.empty()) << error;
  nlohmann::json stats = run_json(kNanotrace + " stats " + file + " --json");
  Rows losses = query_cookbook("loss_per_node", "lossy");
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0][0], "lossy-node");
  EXPECT_EQ(std::stoull(losses[0][2]), stats["records"].get<uint64_t>());
  EXPECT_EQ(std::stoull(losses[0][3]), stats["lost"].get<uint64_t>());
  uint64_t no_slot = 0, reclaimed = 0;
  for (const auto& row : query_cookbook("loss_by_cause", "lossy")) {
    if (row[1] == "no_slot") no_slot += std::stoull(row[7]);
    if (row[1] == "reclaimed") reclaimed += std::stoull(row[7]);
  }
  EXPECT_EQ(no_slot, stats["lost_no_slot"].get<uint64_t>());
  EXPECT_EQ(reclaimed, stats["lost_reclaimed"].get<uint64_t>());
}

// A loop device's I/Os recorded with their kernel events (iograph, `record --kernel
// io_uring,block`: root and tracefs): the io_stages cookbook's counts and per-stage figures
// equal `nanotrace breakdown --json` on the same trace, and its slowest I/Os are the
// analysis layer's (IoStageTracker), stage by stage.
TEST_F(ShipTest, IoStagesEqualBreakdownCommand) {
  SKIP_WITHOUT_KERNEL_TRACING();
  kernel_test::LoopWorkload workload("block", 16);
  ASSERT_TRUE(workload.ready());
  const std::string file = dir_ + "/kernel-io.ntr";
  int code = 0;
  std::string out = workload.record("--kernel io_uring,block", file, &code);
  ASSERT_EQ(code, 0) << out;
  std::string error;
  nlohmann::json report = ship(file, "--database kio --node kio-node", &error);
  ASSERT_TRUE(error.empty()) << error;
  nlohmann::json b = run_json(kNanotrace + " breakdown --json " + file);
  const uint64_t joined = b["joined"].get<uint64_t>();
  // 16 graphs of 128 reads, nearly all of them joined: the comparisons below cover them.
  ASSERT_GE(joined, 1000u) << b.dump();
  EXPECT_EQ(report["ios"].get<uint64_t>(), b["ios"].get<uint64_t>());

  Rows counts = query_cookbook("io_counts_per_node", "kio");
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0][0], "kio-node");
  EXPECT_EQ(std::stoull(counts[0][1]), b["ios"].get<uint64_t>());
  EXPECT_EQ(std::stoull(counts[0][2]), joined);
  EXPECT_EQ(std::stoull(counts[0][3]), b["ordered"].get<uint64_t>());
  EXPECT_EQ(std::stoull(counts[0][4]), b["no_uring"].get<uint64_t>());
  EXPECT_EQ(std::stoull(counts[0][5]), b["no_block"].get<uint64_t>());

  Rows stages = query_cookbook("io_stages_per_node", "kio");
  ASSERT_EQ(stages.size(), b["stages"].size());
  for (size_t i = 0; i < stages.size(); ++i) {
    const nlohmann::json& want = b["stages"][i];
    const std::string name = want["stage"].get<std::string>();
    EXPECT_EQ(stages[i][0], "kio-node");
    EXPECT_EQ(stages[i][1], name);
    EXPECT_EQ(std::stoull(stages[i][2]), want["count"].get<uint64_t>()) << name;
    EXPECT_EQ(std::stoull(stages[i][3]), want["p50_ns"].get<uint64_t>()) << name;
    EXPECT_EQ(std::stoull(stages[i][4]), want["p90_ns"].get<uint64_t>()) << name;
    EXPECT_EQ(std::stoull(stages[i][5]), want["p99_ns"].get<uint64_t>()) << name;
    EXPECT_EQ(std::stoull(stages[i][6]), want["max_ns"].get<uint64_t>()) << name;
    EXPECT_EQ(std::stod(stages[i][7]), want["mean_ns"].get<double>()) << name;
  }

  // The slowest I/Os: the analysis layer's joined I/Os in the query's order.
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  auto tracker = IoStageTracker::create(**trace);
  ASSERT_TRUE(tracker.ok()) << tracker.status().message();
  auto records = (*trace)->read_all_with_kernel();
  Record r;
  while (records->next(&r)) (*tracker)->add(r);
  std::vector<IoStages> ios;
  for (const IoStages& io : (*tracker)->completed()) {
    if (io.joined()) ios.push_back(io);
  }
  std::sort(ios.begin(), ios.end(), [](const IoStages& x, const IoStages& y) {
    const uint64_t tx = x.stage_ns(kIoTimes - 1), ty = y.stage_ns(kIoTimes - 1);
    return tx != ty ? tx > ty : x.ns[0] < y.ns[0];
  });
  Rows slow = query_cookbook("slowest_ios", "kio");
  ASSERT_EQ(slow.size(), 20u);
  const uint64_t origin = (*trace)->time_origin().realtime_ns;
  for (size_t i = 0; i < slow.size(); ++i) {
    const IoStages& io = ios[i];
    for (int s = 0; s < kIoTimes; ++s) {
      // total_ns first, then the five stages.
      EXPECT_EQ(std::stoull(slow[i][s == 0 ? 1 : s + 1]),
                io.stage_ns(s == 0 ? kIoTimes - 1 : s - 1))
          << "row " << i << " column " << s;
    }
    EXPECT_EQ(std::stoull(slow[i][10]), io.user_data) << "row " << i;
    EXPECT_EQ(std::stoull(slow[i][11]), io.dev) << "row " << i;
    EXPECT_EQ(std::stoull(slow[i][12]), io.sector) << "row " << i;
    EXPECT_EQ(std::stoull(slow[i][13]), origin + io.ns[0]) << "row " << i;
  }
  EXPECT_EQ(std::stoull(slow[0][1]), b["stages"][kIoTimes - 1]["max_ns"].get<uint64_t>());
}

// docs/clickhouse.md shows the statements the shipper runs, as it runs them.
TEST(ShipSchemaTest, SchemaIsDocumented) {
  std::ifstream in(std::string(NANOTRACE_SOURCE_DIR) + "/docs/clickhouse.md");
  std::stringstream doc;
  doc << in.rdbuf();
  for (const std::string& sql : ship::schema_sql("nanotrace", "traces_cluster")) {
    EXPECT_NE(doc.str().find(sql + ";"), std::string::npos) << sql;
  }
  for (const char* name :
       {"latency_per_node", "latency_per_minute", "slowest_pairs", "events_per_node",
        "loss_per_node", "loss_by_cause", "io_counts_per_node", "io_stages_per_node", "slowest_ios",
        "trigger_traces", "trigger_records"}) {
    EXPECT_FALSE(cookbook(name).empty()) << name;
  }
}

}  // namespace
}  // namespace nanotrace
