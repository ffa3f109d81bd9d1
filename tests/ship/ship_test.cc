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
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/file_format.hpp"
#include "base/node_identity.hpp"
#include "base/utf8.hpp"
#include "common/child_process.hpp"
#include "fleet/snapshot_shipper.hpp"
#include "kernel/kernel_fixture.hpp"  // tests/kernel
#include "nanotrace/analysis.hpp"
#include "nanotrace/breakdown.hpp"
#include "nanotrace/intervals.hpp"
#include "record/record_helpers.hpp"  // tests/record
#include "ship/clickhouse_http.hpp"
#include "ship/clickhouse_server.hpp"  // tests/ship
#include "ship/schema.hpp"
#include "ship/trace_rows.hpp"

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

// Copies `from` to `to` with one byte flipped in the payload of the `ordinal`-th DATA chunk
// (from 0) of each of the first `threads` thread streams that have one: each fails its
// checksum, which ends its stream there. "" or what went wrong.
std::string damage_data_chunks(const std::string& from, const std::string& to, size_t ordinal,
                               size_t threads) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::pair<uint32_t, uint32_t>, size_t> seen;  // (slot, generation) -> DATA chunks
  size_t off = sizeof(file::FileHeader), damaged = 0;
  while (off + sizeof(file::ChunkHeader) <= bytes.size()) {
    file::ChunkHeader c;
    std::memcpy(&c, bytes.data() + off, sizeof(c));
    if (c.magic != file::kChunkMagic) break;
    if (c.type == static_cast<uint16_t>(file::ChunkType::kData) && c.stored_size > 64 &&
        seen[{c.slot, c.generation}]++ == ordinal && damaged < threads) {
      bytes[off + sizeof(c) + c.stored_size / 2] ^= 0x5a;
      ++damaged;
    }
    off += sizeof(c) + c.stored_size;
  }
  if (damaged != threads) {
    return fmt::format("{}: {} thread streams have a DATA chunk {}, not {}", from, damaged, ordinal,
                       threads);
  }
  std::ofstream(to, std::ios::binary) << bytes;
  return "";
}

// A file's contents.
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every cookbook query of docs/clickhouse.md, by name.
const std::vector<std::string>& cookbook_names() {
  static const std::vector<std::string> names = {
      "latency_per_node", "latency_per_minute", "slowest_pairs",      "events_per_node",
      "loss_per_node",    "loss_by_cause",      "io_counts_per_node", "io_stages_per_node",
      "slowest_ios",      "trigger_traces",     "trigger_records"};
  return names;
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
  // Its rows are all there (what a server killed right after the attach leaves), and no
  // cookbook query counts them: the trace is not stored.
  ASSERT_EQ(count(*shards_[0], "SELECT count() FROM interrupted.events_local"),
            first["events"].get<uint64_t>());
  for (const std::string& name : cookbook_names()) {
    EXPECT_EQ(query_cookbook(name, "interrupted").size(), 0u) << name;
  }
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
  EXPECT_EQ(query_cookbook("latency_per_node", "interrupted").size(), 1u);
}

// The server dies while a trace is being staged: the shipper (--retry-for 0) says so in one
// line, nothing of the trace is stored, and shipping it again, started while the server is
// down, retries until it is back and stores all of it. The shipper is stopped (SIGSTOP) once
// staged rows show, the server killed, the shipper resumed: its next request meets a dead
// connection, whatever the machine's speed.
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
          server.url().c_str(), "--batch-rows", "2000", "--node", "node-k", "--retry-for", "0",
          nullptr);
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

  // Shipped again while the server is still down: a transient error, retried (said on stderr)
  // until the server is back, then all of it is stored, and nothing of the killed attempt was
  // in the real tables (no rows replaced). This time on three connections, zstd-compressed
  // (the first ship: two, uncompressed, the default to a server on this machine).
  const std::string relog = dir_ + "/killed-reship.log";
  pid_t reship = fork();
  if (reship == 0) {
    int fd = open(relog.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(kNanotrace.c_str(), "nanotrace", "ship", file.c_str(), "--clickhouse",
          server.url().c_str(), "--batch-rows", "2000", "--node", "node-k", "--retry-for", "120s",
          "--connections", "3", "--compress", "zstd", "--json", nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  ASSERT_TRUE(server.start(&why)) << why;
  waitpid(reship, &status, 0);
  const std::string out = slurp(relog);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("; retrying in 0.5 s\n"), std::string::npos) << out;
  std::string last = out.substr(0, out.size() - 1);
  last = last.substr(last.rfind('\n') + 1);
  nlohmann::json report = nlohmann::json::parse(last, nullptr, false);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_EQ(report["replaced_rows"].get<uint64_t>(), 0u);
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
  std::string out = run_command(
      kNanotrace + " ship " + file + " --clickhouse " + nowhere + " --retry-for 0 2>&1", &code);
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
  // Options out of range: said before anything is sent.
  out = run_command(kNanotrace + " ship " + file + " --clickhouse " + shards_[0]->url() +
                        " --database refused --connections 0 2>&1",
                    &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("--connections: 1 to 16"), std::string::npos) << out;
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

// A copy of a trace with a DATA chunk damaged in each of its two busy threads ships what reads,
// exit 0 with one warning line, its unreadable records counted as lost (a `losses` row of cause
// corrupt) and named by the cookbook's loss queries; it gets an id of its own, so the intact file
// shipped after it is stored whole, and the copy shipped after the intact file (another database)
// is not taken for it. `stats` counts and names the same in text and JSON.
TEST_F(ShipTest, DamagedCopyShipsWhatReadsUnderAnIdOfItsOwn) {
  const std::string intact = dir_ + "/intact.ntr", damaged = dir_ + "/damaged.ntr";
  // Rings of 1 MiB: each worker's records in two DATA chunks (a quarter of the ring each).
  ASSERT_EQ(make_trace("NANOTRACE_BUFFER=1M", "--pairs 16000", intact), "");
  ASSERT_EQ(damage_data_chunks(intact, damaged, 1, 2), "");
  nlohmann::json whole = run_json(kNanotrace + " stats " + intact + " --json");
  nlohmann::json part = run_json(kNanotrace + " stats " + damaged + " --json");
  const uint64_t all = whole["records"].get<uint64_t>();
  const uint64_t readable = part["records"].get<uint64_t>();
  ASSERT_LT(readable, all);
  ASSERT_EQ(whole["lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(part["corrupt_blocks"].get<uint64_t>(), 2u);
  EXPECT_EQ(part["unreadable"].get<uint64_t>(), all - readable);
  EXPECT_EQ(part["lost"].get<uint64_t>(), all - readable);
  int code = 0;
  std::string text = run_command(kNanotrace + " stats " + damaged + " 2>&1", &code);
  EXPECT_NE(text.find(fmt::format("{} lost", all - readable)), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("damaged: 2 corrupt blocks skipped, {} records unreadable",
                                  all - readable)),
            std::string::npos)
      << text;

  auto ship_one = [&](const std::string& file, const std::string& db, const std::string& node,
                      std::string* errors) {
    const std::string err = dir_ + "/ship.err";
    std::string out =
        run_command(kNanotrace + " ship " + file + " --clickhouse " + shards_[0]->url() +
                        " --database " + db + " --node " + node + " --json 2>" + err,
                    &code);
    *errors = slurp(err);
    EXPECT_EQ(code, 0) << out << *errors;
    return nlohmann::json::parse(out, nullptr, false);
  };
  std::string errors;
  nlohmann::json first = ship_one(damaged, "damaged", "dmg", &errors);
  EXPECT_TRUE(first["damaged"].get<bool>());
  EXPECT_EQ(first["corrupt_blocks"].get<uint64_t>(), 2u);
  EXPECT_EQ(first["unreadable_records"].get<uint64_t>(), all - readable);
  EXPECT_EQ(first["events"].get<uint64_t>(), readable);
  EXPECT_EQ(first["lost_records"].get<uint64_t>(), all - readable);
  EXPECT_EQ(std::count(errors.begin(), errors.end(), '\n'), 1) << errors;
  EXPECT_NE(errors.find("nanotrace: warning: " + damaged + ": damaged (2 corrupt blocks, " +
                        std::to_string(all - readable) + " records unreadable)"),
            std::string::npos)
      << errors;
  nlohmann::json second = ship_one(intact, "damaged", "whole", &errors);
  EXPECT_FALSE(second["already_stored"].get<bool>()) << "the intact file took the copy's id";
  EXPECT_NE(second["trace_id"], first["trace_id"]);
  EXPECT_FALSE(second["damaged"].get<bool>());
  EXPECT_EQ(second["events"].get<uint64_t>(), all);
  EXPECT_TRUE(errors.empty()) << errors;
  nlohmann::json again = ship_one(damaged, "damaged", "dmg", &errors);
  EXPECT_TRUE(again["already_stored"].get<bool>());
  EXPECT_EQ(again["trace_id"], first["trace_id"]);

  Rows losses = query_cookbook("loss_per_node", "damaged");
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(losses[0][0], "dmg");
  EXPECT_EQ(std::stoull(losses[0][2]), readable);
  EXPECT_EQ(std::stoull(losses[0][3]), part["lost"].get<uint64_t>());
  EXPECT_EQ(losses[0][4], "2");
  EXPECT_EQ(losses[1][0], "whole");
  EXPECT_EQ(std::stoull(losses[1][2]), all);
  EXPECT_EQ(losses[1][3], "0");
  uint64_t corrupt_records = 0, corrupt_blocks = 0;
  for (const auto& row : query_cookbook("loss_by_cause", "damaged")) {
    EXPECT_EQ(row[0], "dmg");
    EXPECT_EQ(row[1], "corrupt");
    corrupt_records += std::stoull(row[7]);
    corrupt_blocks += std::stoull(row[8]);
  }
  EXPECT_EQ(corrupt_records, all - readable);
  EXPECT_EQ(corrupt_blocks, 2u);

  // The other order: the intact file stored first, then the copy.
  EXPECT_EQ(ship_one(intact, "damaged2", "whole", &errors)["trace_id"], second["trace_id"]);
  nlohmann::json late = ship_one(damaged, "damaged2", "dmg", &errors);
  EXPECT_FALSE(late["already_stored"].get<bool>()) << "the copy was taken for the intact file";
  EXPECT_EQ(late["trace_id"], first["trace_id"]);
  EXPECT_EQ(late["events"].get<uint64_t>(), readable);
}

// A trace is stored once, as first shipped: node-a's file shipped again without --node, or
// with another pair, is the same trace, and the ship says what it did not store.
TEST_F(ShipTest, ReshipsThatDifferSayWhatTheyDidNotStore) {
  const Shipped& a = node(0);
  // The node name a ship without --node gives (as TraceRows names this machine).
  std::string host = utf8::valid(sys::hostname());
  if (host.empty()) host = "unknown";
  ASSERT_NE(host, "node-a");
  std::string error;
  nlohmann::json plain = ship(a.file, "", &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(plain["already_stored"].get<bool>());
  EXPECT_EQ(plain["trace_id"], a.report["trace_id"]);
  EXPECT_EQ(plain["stored_nodes"], nlohmann::json({"node-a"}));
  EXPECT_EQ(plain["nodes_not_stored"], nlohmann::json({utf8::valid(host)}));
  EXPECT_EQ(plain["pairs_not_stored"], nlohmann::json::array());
  const std::string reversed = "io:complete -> io:submit by req";
  nlohmann::json paired = ship(a.file, "--node node-a --pair io:complete,io:submit,req", &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(paired["already_stored"].get<bool>());
  EXPECT_EQ(paired["nodes_not_stored"], nlohmann::json::array());
  EXPECT_EQ(paired["pairs_not_stored"], nlohmann::json({reversed}));
  const auto& stored = paired["stored_pairs"];
  EXPECT_NE(std::find(stored.begin(), stored.end(), kPair), stored.end()) << stored;
  // In text: one line that says both.
  int code = 0;
  std::string out = run_command(kNanotrace + " ship " + a.file + " --clickhouse " +
                                    shards_[0]->url() + " --clickhouse " + shards_[1]->url() +
                                    " --cluster nt --pair io:complete,io:submit,req 2>&1",
                                &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("is already stored"), std::string::npos) << out;
  EXPECT_NE(out.find("stored as node node-a, not as " + utf8::escape_text(host)), std::string::npos)
      << out;
  EXPECT_NE(out.find("pairs not stored: " + reversed), std::string::npos) << out;
  EXPECT_EQ(count(*shards_[0], "SELECT count() FROM nanotrace.traces WHERE trace_id = " +
                                   std::to_string(std::stoull(
                                       a.report["trace_id"].get<std::string>(), nullptr, 16))),
            1u);
}

// Refusals are not retried: a wrong password, and a table whose column has another type than
// the schema's, end `ship` at once (with --retry-for 60s) in one line naming the cause. Columns
// an older nanotrace's tables lack are added, and the trace stored.
TEST_F(ShipTest, RefusalsAreNotRetriedAndOldTablesAreCompleted) {
  const std::string file = node(0).file;
  const int port = shards_[0]->http_port();
  int code = 0;
  auto started = std::chrono::steady_clock::now();
  std::string out =
      run_command(kNanotrace + " ship " + file + " --clickhouse http://default:wrong@127.0.0.1:" +
                      std::to_string(port) + " --retry-for 60s 2>&1",
                  &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("refused: code 193 WRONG_PASSWORD"), std::string::npos) << out;
  EXPECT_EQ(out.find("wrong@"), std::string::npos) << "the password is shown: " << out;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30)) << "retried";

  auto c = shards_[0]->client();
  for (const std::string& sql : ship::schema_sql("mistyped", "")) ASSERT_TRUE(c->query(sql).ok());
  ASSERT_TRUE(c->query("ALTER TABLE mistyped.events_local MODIFY COLUMN seq Int64").ok());
  started = std::chrono::steady_clock::now();
  out = run_command(kNanotrace + " ship " + file + " --clickhouse " + shards_[0]->url() +
                        " --database mistyped --retry-for 60s 2>&1",
                    &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("mistyped.events_local.seq is Int64 there and UInt64 in nanotrace's schema"),
            std::string::npos)
      << out;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30)) << "retried";
  EXPECT_EQ(count(*shards_[0], "SELECT count() FROM mistyped.events_local"), 0u);

  // Tables of an older nanotrace: no corrupt_blocks, no pairs.
  for (const std::string& sql : ship::schema_sql("older", "")) ASSERT_TRUE(c->query(sql).ok());
  for (const char* alter :
       {"traces DROP COLUMN pairs", "traces DROP COLUMN corrupt_blocks",
        "losses DROP COLUMN corrupt_blocks", "traces_local DROP COLUMN pairs",
        "traces_local DROP COLUMN corrupt_blocks", "losses_local DROP COLUMN corrupt_blocks"}) {
    ASSERT_TRUE(c->query(std::string("ALTER TABLE older.") + alter).ok()) << alter;
  }
  out = run_command(kNanotrace + " ship " + file + " --clickhouse " + shards_[0]->url() +
                        " --database older --node node-a --json 2>&1",
                    &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(count(*shards_[0],
                  "SELECT count() FROM system.columns WHERE database = 'older' AND "
                  "name IN ('pairs', 'corrupt_blocks')"),
            6u);
  Rows pairs = query("SELECT DISTINCT arrayJoin(pairs) FROM older.traces");
  ASSERT_FALSE(pairs.empty());
  EXPECT_EQ(query_cookbook("latency_per_node", "older").size(), 1u);
}

// The agent's shipper stops at a refusal (a wrong password): one attempt, no retry for ever,
// the snapshot kept queued and unmarked, health() saying why.
TEST_F(ShipTest, SnapshotShipperStopsAtARefusal) {
  const std::string spool = dir_ + "/refused-spool";
  ASSERT_EQ(mkdir(spool.c_str(), 0700), 0);
  const std::string snapshot = spool + "/r1.node.1.nt";
  std::ofstream(snapshot, std::ios::binary) << slurp(node(0).file);
  chmod(snapshot.c_str(), 0600);
  fleet::SnapshotShipperOptions o;
  o.servers = {"http://default:wrong@127.0.0.1:" + std::to_string(shards_[0]->http_port())};
  o.retry_min_ns = o.retry_max_ns = 50'000'000;  // a retry would come every 0.05 s
  std::mutex mu;
  std::string log;
  auto shipper = fleet::SnapshotShipper::start(spool, o, [&](const std::string& line) {
    std::lock_guard lock(mu);
    log += line + "\n";
  });
  ASSERT_TRUE(shipper.ok()) << shipper.status().message();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!(*shipper)->health().refused && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE((*shipper)->health().refused);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // ten retry periods
  fleet::ShipHealth h = (*shipper)->health();
  EXPECT_EQ(h.failures, 1u);
  EXPECT_EQ(h.queued, 1u);
  EXPECT_EQ(h.shipped, 0u);
  EXPECT_EQ(h.rejected, 0u);
  EXPECT_NE(h.last_error.find("refused, shipping stopped"), std::string::npos) << h.last_error;
  EXPECT_NE(h.last_error.find("WRONG_PASSWORD"), std::string::npos) << h.last_error;
  (*shipper)->stop();
  EXPECT_EQ(access((snapshot + ".shipped").c_str(), F_OK), -1);
  std::lock_guard lock(mu);
  EXPECT_NE(log.find("shipping stopped"), std::string::npos) << log;
}

// docs/clickhouse.md shows the statements the shipper runs, as it runs them.
TEST(ShipSchemaTest, SchemaIsDocumented) {
  std::ifstream in(std::string(NANOTRACE_SOURCE_DIR) + "/docs/clickhouse.md");
  std::stringstream doc;
  doc << in.rdbuf();
  for (const std::string& sql : ship::schema_sql("nanotrace", "traces_cluster")) {
    EXPECT_NE(doc.str().find(sql + ";"), std::string::npos) << sql;
  }
  for (const std::string& name : cookbook_names()) {
    EXPECT_FALSE(cookbook(name).empty()) << name;
  }
}

}  // namespace
}  // namespace nanotrace
