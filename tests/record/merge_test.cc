// Several nodes' snapshots merged into one trace file (`nanotrace merge`), with real traced
// processes and the real CLI. On one machine distinct nodes are simulated by their identity
// (NANOTRACE_NODE_NAME; NANOTRACE_NODE_BOOT_ID for a node that must not be taken to share the
// clock). Checked: every snapshot names its node and carries bracketed clock pairs; nodes of one
// boot merge in exact order; a node aligned through CLOCK_REALTIME lands within its pairs' error
// and keeps its own order; the trigger that froze a process is the merge's origin; the readers
// and exports show the nodes (babeltrace2 merges the CTF traces); damaged inputs and damaged
// merged files are refused with one line.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/file_format.hpp"
#include "base/node_meta.hpp"
#include "export/protobuf_decode.hpp"
#include "kernel/kernel_fixture.hpp"  // tests/kernel
#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using nlohmann::json;
using testing::ChildProcess;
using testing::kCli;
using testing::kProducer;

std::string run(const std::string& cmd, int expect = 0) {
  int code = 0;
  std::string out = testing::run_command(cmd, &code);
  EXPECT_EQ(code, expect) << cmd << "\n" << out;
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::string trimmed_file(const char* path) {
  std::string s = read_file(path);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// A producer that writes its records once told to, then holds (its segment stays readable).
struct Producer {
  ChildProcess child;
  pid_t pid = 0;
  explicit Producer(int events, int threads = 2)
      : child({kProducer, "--threads", std::to_string(threads), "--events", std::to_string(events),
               "--go", "--hold"},
              {"NANOTRACE_BUFFER=256K"}) {
    pid = testing::read_pid(child);
  }
  void go() {
    child.write_line("go");
    EXPECT_EQ(child.read_line(), "ready");
  }
  ~Producer() {
    child.close_stdin();
    child.wait();
  }
};

// A snapshot of pid taken as node `name` (extra: more environment for the CLI).
std::string snapshot(pid_t pid, const std::string& name, const std::string& extra = "") {
  std::string path = testing::temp_path(name + ".ntr");
  run("NANOTRACE_NODE_NAME=" + name + " " + extra + " " + kCli + " snapshot " +
      std::to_string(pid) + " -o " + path + " >/dev/null 2>&1");
  return path;
}

struct Rec {
  uint32_t process;
  uint32_t tid;
  uint64_t seq;
  uint64_t ticks;
};

std::vector<Rec> records_of(const std::string& path) {
  std::vector<Rec> out;
  auto trace = testing::open_ok(path);
  if (!trace) return out;
  auto source = trace->read_all();
  Record r;
  while (source->next(&r)) {
    const ThreadInfo& t = source->threads()[r.thread].info;
    out.push_back({t.process, t.tid, r.seq, r.ticks});
  }
  return out;
}

// Offsets of every chunk of a trace file, and their headers.
std::vector<std::pair<size_t, file::ChunkHeader>> chunks_of(const std::string& data) {
  std::vector<std::pair<size_t, file::ChunkHeader>> out;
  size_t off = sizeof(file::FileHeader);
  while (off + sizeof(file::ChunkHeader) <= data.size()) {
    file::ChunkHeader c;
    std::memcpy(&c, data.data() + off, sizeof(c));
    out.emplace_back(off, c);
    off += sizeof(c) + c.stored_size;
  }
  return out;
}

// Rewrites the NODE chunk of node `index` in a merged file with edit applied (checksums
// recomputed: the damage is in the content, not in transit).
std::string edit_node(std::string data, uint32_t index,
                      const std::function<void(file::NodePayload*)>& edit) {
  for (auto& [off, c] : chunks_of(data)) {
    if (c.type != static_cast<uint16_t>(file::ChunkType::kNode)) continue;
    file::NodePayload n;
    std::memcpy(&n, data.data() + off + sizeof(c), sizeof(n));
    if (n.node != index) continue;
    edit(&n);
    std::memcpy(data.data() + off + sizeof(c), &n, sizeof(n));
    c.payload_crc = file::crc32c(0, &n, sizeof(n));
    c.header_crc = file::crc32c(0, &c, offsetof(file::ChunkHeader, header_crc));
    std::memcpy(data.data() + off, &c, sizeof(c));
  }
  return data;
}

TEST(MergeTest, EverySnapshotAndRecordingNamesItsNode) {
  Producer p(500);
  p.go();
  // The machine's own identity by default.
  std::string own = testing::temp_path("own.ntr");
  run(kCli + " snapshot " + std::to_string(p.pid) + " -o " + own + " >/dev/null");
  auto trace = testing::open_ok(own);
  ASSERT_TRUE(trace);
  ASSERT_EQ(trace->nodes().size(), 1u);
  const NodeInfo& n = trace->nodes()[0];
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(n.hostname, host);
  EXPECT_EQ(n.boot_id, trimmed_file("/proc/sys/kernel/random/boot_id"));
  EXPECT_EQ(n.machine_id, trimmed_file("/etc/machine-id"));
  EXPECT_EQ(n.alignment, "own");
  EXPECT_EQ(n.process_count, 1u);
  EXPECT_FALSE(n.has_origin);
  EXPECT_GT(n.ticks_per_second, 1000000u);
  // 8 pairs, each bracketing its wall-clock reading tightly, taken just now.
  ASSERT_EQ(n.clock_pairs.size(), 8u);
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t now_ns = static_cast<uint64_t>(now.tv_sec) * 1000000000ull + now.tv_nsec;
  for (const ClockReading& c : n.clock_pairs) {
    EXPECT_LE(c.ticks_before, c.ticks_after);
    EXPECT_LT(c.realtime_ns, now_ns);
    EXPECT_GT(c.realtime_ns, now_ns - 60000000000ull);
  }
  uint64_t tightest = UINT64_MAX;
  for (const ClockReading& c : n.clock_pairs) {
    tightest = std::min(tightest, c.ticks_after - c.ticks_before);
  }
  EXPECT_LT(tightest * 1e9 / n.ticks_per_second, 100000.0);  // well under 0.1 ms
  // No clock-sync daemon here: said so, not guessed.
  if (access("/run/chrony/chronyd.sock", F_OK) != 0) {
    EXPECT_EQ(n.sync_source, "unknown");
    EXPECT_EQ(n.sync_bound_ns, kUnknownErrorBound);
  }
  json stats = json::parse(run(kCli + " stats --json " + own));
  ASSERT_EQ(stats["nodes"].size(), 1u);
  EXPECT_EQ(stats["nodes"][0]["hostname"], host);
  EXPECT_EQ(stats["threads"][0]["node"], host);

  // The identity can be overridden; a recording names its node too.
  std::string named = snapshot(p.pid, "node-a");
  trace = testing::open_ok(named);
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->nodes().at(0).hostname, "node-a");
  std::string recorded = testing::temp_path("recorded.ntr");
  run("NANOTRACE_NODE_NAME=rec-node " + kCli + " record " + std::to_string(p.pid) +
      " --duration 0.05 -o " + recorded + " >/dev/null 2>&1");
  trace = testing::open_ok(recorded);
  ASSERT_TRUE(trace);
  ASSERT_EQ(trace->nodes().size(), 1u);
  EXPECT_EQ(trace->nodes()[0].hostname, "rec-node");
  for (const std::string& f : {own, named, recorded}) unlink(f.c_str());
}

// The file as a version 2 writer made it: no NODE chunk, the END chunk renumbered.
std::string as_version_2(const std::string& data) {
  std::string out = data.substr(0, sizeof(file::FileHeader));
  file::FileHeader h;
  std::memcpy(&h, out.data(), sizeof(h));
  h.version = 2;
  h.header_crc = file::crc32c(0, &h, offsetof(file::FileHeader, header_crc));
  std::memcpy(out.data(), &h, sizeof(h));
  uint64_t index = 0;
  for (auto& [off, c] : chunks_of(data)) {
    if (c.type == static_cast<uint16_t>(file::ChunkType::kNode)) continue;
    std::string payload = data.substr(off + sizeof(c), c.stored_size);
    if (c.type == static_cast<uint16_t>(file::ChunkType::kEnd)) {
      file::EndPayload e;
      std::memcpy(&e, payload.data(), sizeof(e));
      e.chunks = index;
      std::memcpy(payload.data(), &e, sizeof(e));
      c.payload_crc = file::crc32c(0, payload.data(), payload.size());
    }
    c.index = index++;
    c.header_crc = file::crc32c(0, &c, offsetof(file::ChunkHeader, header_crc));
    out.append(reinterpret_cast<const char*>(&c), sizeof(c));
    out += payload;
  }
  return out;
}

TEST(MergeTest, VersionsBeforeNodesStillReadAndLaterOnesAreRefused) {
  Producer p(500);
  p.go();
  std::string snap = snapshot(p.pid, "v3");
  const std::string data = read_file(snap);
  std::string old = testing::temp_path("v2.ntr");
  write_file(old, as_version_2(data));
  auto trace = testing::open_ok(old);
  ASSERT_TRUE(trace);
  EXPECT_TRUE(trace->warning().empty()) << trace->warning();
  EXPECT_TRUE(trace->nodes().empty());
  EXPECT_EQ(records_of(old).size(), 1000u);
  // Merging needs the node description.
  int code = 0;
  std::string err = testing::run_command(
      kCli + " merge " + snap + " " + old + " -o " + old + ".m 2>&1 >/dev/null", &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(err.find("no node description"), std::string::npos) << err;
  // A version this reader does not know is refused whole, as a version 2 reader refuses 3.
  std::string future = data;
  file::FileHeader h;
  std::memcpy(&h, future.data(), sizeof(h));
  h.version = file::kFileVersion + 1;
  h.header_crc = file::crc32c(0, &h, offsetof(file::FileHeader, header_crc));
  std::memcpy(future.data(), &h, sizeof(h));
  write_file(old, future);
  auto refused = Trace::open(old);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.status().message().find("version " + std::to_string(file::kFileVersion + 1)),
            std::string::npos);
  unlink(snap.c_str());
  unlink(old.c_str());
}

TEST(MergeTest, NodesOfOneBootMergeInExactOrder) {
  // Three processes writing at once, each snapshotted as its own node.
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < 3; ++i) producers.push_back(std::make_unique<Producer>(2000));
  for (auto& p : producers) p->child.write_line("go");
  for (auto& p : producers) ASSERT_EQ(p->child.read_line(), "ready");
  std::vector<std::string> files;
  std::vector<std::string> names = {"alpha", "beta", "gamma"};
  for (int i = 0; i < 3; ++i) files.push_back(snapshot(producers[i]->pid, names[i]));
  std::string merged = testing::temp_path("merged.ntr");
  json m = json::parse(
      run(kCli + " merge --json " + files[0] + " " + files[1] + " " + files[2] + " -o " + merged));
  ASSERT_EQ(m["nodes"].size(), 3u);
  EXPECT_EQ(m["nodes"][0]["alignment"], "reference");
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(m["nodes"][i]["alignment"], "shared-clock");
    EXPECT_EQ(m["nodes"][i]["error_bound_ns"], 0);
    EXPECT_EQ(m["nodes"][i]["hostname"], names[i]);
  }
  EXPECT_TRUE(m["origin"].is_null());

  // Each node's records, unchanged (same clock values), in the merged order: every record of
  // every input, globally by clock value, each thread in its own order.
  std::vector<Rec> expected;
  for (int i = 0; i < 3; ++i) {
    for (Rec r : records_of(files[i])) {
      r.process = i;
      expected.push_back(r);
    }
  }
  ASSERT_EQ(expected.size(), 3u * 2 * 2000);
  std::vector<Rec> got = records_of(merged);
  ASSERT_EQ(got.size(), expected.size());
  std::stable_sort(expected.begin(), expected.end(),
                   [](const Rec& a, const Rec& b) { return a.ticks < b.ticks; });
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> next_seq;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].ticks, expected[i].ticks) << "at " << i;
    auto key = std::make_pair(got[i].process, got[i].tid);
    if (next_seq.count(key)) {
      ASSERT_EQ(got[i].seq, next_seq[key]) << "a node's thread out of its own order";
    }
    next_seq[key] = got[i].seq + 1;
  }
  // The three nodes' records interleave (they were written at once): the order is a merge.
  std::set<uint32_t> first_half;
  for (size_t i = 0; i < got.size() / 2; ++i) first_half.insert(got[i].process);
  EXPECT_GE(first_half.size(), 2u);

  auto trace = testing::open_ok(merged);
  ASSERT_TRUE(trace);
  ASSERT_EQ(trace->nodes().size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(trace->nodes()[i].hostname, names[i]);
    EXPECT_EQ(trace->nodes()[i].first_process, i);
    EXPECT_EQ(trace->processes()[i].node, i);
    EXPECT_EQ(trace->processes()[i].pid, static_cast<uint32_t>(producers[i]->pid));
  }
  // dump names each record's node; stats lists them.
  std::string dump = run(kCli + " dump --json -n 50 " + merged);
  std::istringstream lines(dump);
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line);
    ASSERT_TRUE(j.contains("node")) << line;
    const uint64_t pid = j["pid"];
    for (int i = 0; i < 3; ++i) {
      if (pid == static_cast<uint64_t>(producers[i]->pid)) {
        EXPECT_EQ(j["node"], names[i]);
      }
    }
  }
  std::string stats = run(kCli + " stats " + merged);
  for (const std::string& name : names) EXPECT_NE(stats.find(name), std::string::npos) << stats;
  for (const std::string& f : files) unlink(f.c_str());
  unlink(merged.c_str());
}

TEST(MergeTest, ANodeOfSeveralProcessesKeepsThemTogether) {
  // A recording of two processes is one node of two; merged after a one-process snapshot, its
  // processes are renumbered 1 and 2 (their chunks' slots and their THREAD and LOSS payloads).
  Producer a(300), b(300), c(300);
  std::string recorded = testing::temp_path("two.ntr");
  ChildProcess recorder(
      {"/bin/sh", "-c",
       "NANOTRACE_NODE_NAME=pair exec " + kCli + " record " + std::to_string(b.pid) + " " +
           std::to_string(c.pid) + " --duration 1 -o " + recorded + " >/dev/null 2>&1"},
      {});
  ASSERT_TRUE(testing::wait_consumer(b.pid));
  ASSERT_TRUE(testing::wait_consumer(c.pid));
  a.go();
  b.go();
  c.go();
  ASSERT_EQ(recorder.wait(), 0);
  std::string single = snapshot(a.pid, "single");
  auto two = testing::open_ok(recorded);
  ASSERT_TRUE(two);
  ASSERT_EQ(two->nodes().size(), 1u);
  EXPECT_EQ(two->nodes()[0].hostname, "pair");
  EXPECT_EQ(two->nodes()[0].process_count, 2u);
  std::string merged = testing::temp_path("three.ntr");
  run(kCli + " merge " + single + " " + recorded + " -o " + merged + " >/dev/null");
  auto trace = testing::open_ok(merged);
  ASSERT_TRUE(trace);
  EXPECT_TRUE(trace->warning().empty()) << trace->warning();
  ASSERT_EQ(trace->nodes().size(), 2u);
  EXPECT_EQ(trace->nodes()[1].first_process, 1u);
  EXPECT_EQ(trace->nodes()[1].process_count, 2u);
  ASSERT_EQ(trace->processes().size(), 3u);
  std::map<uint32_t, uint64_t> records_by_pid;
  std::map<uint32_t, uint32_t> node_by_pid;
  auto source = trace->read_all();
  Record r;
  while (source->next(&r)) {
    ++records_by_pid[r.pid];
    node_by_pid[r.pid] = trace->processes()[source->threads()[r.thread].info.process].node;
  }
  for (const ThreadStats& t : source->threads()) EXPECT_EQ(t.lost(), 0u) << t.info.tid;
  EXPECT_EQ(records_by_pid[a.pid], 600u);
  EXPECT_EQ(records_by_pid[b.pid], 600u);
  EXPECT_EQ(records_by_pid[c.pid], 600u);
  EXPECT_EQ(node_by_pid[a.pid], 0u);
  EXPECT_EQ(node_by_pid[b.pid], 1u);
  EXPECT_EQ(node_by_pid[c.pid], 1u);
  for (const std::string& f : {recorded, single, merged}) unlink(f.c_str());
}

TEST(MergeTest, ANodeOfAnotherBootIsAlignedByWallClockWithinItsPairs) {
  Producer p(3000);
  p.go();
  // The same process, its snapshot taken as the reference and again as a node of another
  // boot: the merge cannot use the shared clock and goes through CLOCK_REALTIME, so the same
  // record seen by both lands at two times whose difference is the alignment's real error.
  std::string ref = snapshot(p.pid, "ref");
  std::string other = snapshot(p.pid, "far", "NANOTRACE_NODE_BOOT_ID=another-boot");
  std::string merged = testing::temp_path("far-merged.ntr");
  json m = json::parse(run(kCli + " merge --json " + ref + " " + other + " -o " + merged));
  ASSERT_EQ(m["nodes"].size(), 2u);
  const json& far = m["nodes"][1];
  EXPECT_EQ(far["alignment"], "realtime");
  const uint64_t pair_error = far["pair_error_ns"];
  EXPECT_GT(pair_error, 0u);
  EXPECT_LT(pair_error, 1000000u);
  // No clock-sync daemon: the bound is unknown (the pairs' part is still reported).
  if (far["sync_source"] == "unknown") {
    EXPECT_TRUE(far["error_bound_ns"].is_null());
  }
  std::string text = run(kCli + " merge " + ref + " " + other + " -o " + merged);
  EXPECT_NE(text.find("realtime"), std::string::npos) << text;
  EXPECT_NE(text.find("pairs ±"), std::string::npos) << text;

  auto trace = testing::open_ok(merged);
  ASSERT_TRUE(trace);
  ASSERT_EQ(trace->nodes().size(), 2u);
  EXPECT_EQ(trace->nodes()[1].alignment, "realtime");
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> ref_time;  // (tid, seq) -> ns
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> next_seq;
  uint64_t matched = 0, worst = 0;
  auto source = trace->read_all();
  Record r;
  std::vector<std::pair<std::pair<uint32_t, uint64_t>, uint64_t>> far_times;
  while (source->next(&r)) {
    const ThreadInfo& t = source->threads()[r.thread].info;
    auto key = std::make_pair(t.process, t.tid);
    if (next_seq.count(key)) {
      ASSERT_EQ(r.seq, next_seq[key]);  // each node in its own order
    }
    next_seq[key] = r.seq + 1;
    if (t.process == 0) {
      ref_time[{t.tid, r.seq}] = r.time_ns;
    } else {
      far_times.push_back({{t.tid, r.seq}, r.time_ns});
    }
  }
  for (const auto& [k, ns] : far_times) {
    auto it = ref_time.find(k);
    if (it == ref_time.end()) continue;
    ++matched;
    worst = std::max(worst, ns > it->second ? ns - it->second : it->second - ns);
  }
  EXPECT_EQ(matched, 2u * 3000);
  // Within the pairs' error plus the wall clock's own jitter between two readings (no
  // daemon steps it between two snapshots taken milliseconds apart).
  EXPECT_LE(worst, pair_error + 20000) << "worst " << worst << " ns, pairs " << pair_error;
  for (const std::string& f : {ref, other, merged}) unlink(f.c_str());
}

TEST(MergeTest, TheTriggerThatFrozeANodeIsTheOrigin) {
  Producer quiet(200), fired(1000);
  // Node "n3"'s process freezes on its thread's record 300 (10 events after it).
  run(kCli + " arm " + std::to_string(fired.pid) + " 'test:rec seq==300' --after 10 >/dev/null");
  quiet.go();
  fired.go();
  std::string a = snapshot(quiet.pid, "n1"), b = snapshot(fired.pid, "n3");
  std::string merged = testing::temp_path("origin-merged.ntr");
  json m = json::parse(run(kCli + " merge --json " + a + " " + b + " -o " + merged));
  ASSERT_FALSE(m["origin"].is_null()) << m.dump();
  EXPECT_EQ(m["origin"]["node"], 1);
  EXPECT_EQ(m["origin"]["hostname"], "n3");
  EXPECT_EQ(m["origin"]["pid"], fired.pid);
  EXPECT_EQ(m["origin"]["event"], "test:rec");
  auto trace = testing::open_ok(merged);
  ASSERT_TRUE(trace);
  const NodeInfo& n3 = trace->nodes().at(1);
  ASSERT_TRUE(n3.has_origin);
  EXPECT_EQ(n3.origin_pid, static_cast<uint32_t>(fired.pid));
  EXPECT_FALSE(trace->nodes()[0].has_origin);
  // The record it names is in the merged file: that thread's record at origin_seq, at the
  // origin's time, with seq field 300.
  auto source = trace->read_all();
  Record r;
  bool found = false;
  while (source->next(&r)) {
    const ThreadInfo& t = source->threads()[r.thread].info;
    if (t.process == 1 && t.tid == n3.origin_tid && r.seq == n3.origin_seq) {
      found = true;
      EXPECT_EQ(r.ticks, n3.origin_ticks);
      EXPECT_EQ(r.values[1].bits, 300u);
    }
  }
  EXPECT_TRUE(found);
  json stats = json::parse(run(kCli + " stats --json " + merged));
  EXPECT_EQ(stats["origin"]["hostname"], "n3");
  EXPECT_EQ(stats["origin"]["tid"], n3.origin_tid);
  EXPECT_EQ(stats["origin"]["seq"], n3.origin_seq);
  std::string text = run(kCli + " stats " + merged);
  EXPECT_NE(text.find("origin: node 1 (n3)"), std::string::npos) << text;
  for (const std::string& f : {a, b, merged}) unlink(f.c_str());
}

TEST(MergeTest, DamagedInputsAreRefusedWithOneLine) {
  Producer p(2000);
  p.go();
  std::string good = snapshot(p.pid, "good"), second = snapshot(p.pid, "second");
  const std::string data = read_file(good);
  std::string bad = testing::temp_path("bad.ntr"), out = testing::temp_path("bad-merged.ntr");
  auto refused = [&](const std::string& inputs, const std::string& expect,
                     const std::string& output = "") {
    int code = 0;
    std::string err = testing::run_command(
        kCli + " merge " + inputs + " -o " + (output.empty() ? out : output) + " 2>&1 >/dev/null",
        &code);
    EXPECT_NE(code, 0) << inputs;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find(expect), std::string::npos) << err;
    EXPECT_NE(access(out.c_str(), F_OK), 0) << "a failed merge leaves no output";
  };
  // Cut short: at the middle, inside the last chunk, before the END chunk.
  auto chunks = chunks_of(data);
  ASSERT_GT(chunks.size(), 4u);
  for (size_t cut : {data.size() / 2, data.size() - 5, chunks.back().first}) {
    write_file(bad, data.substr(0, cut));
    refused(good + " " + bad, "bad.ntr");
  }
  // A DATA payload that fails its checksum (found only when copied).
  for (auto& [off, c] : chunks) {
    if (c.type != static_cast<uint16_t>(file::ChunkType::kData)) continue;
    std::string copy = data;
    copy[off + sizeof(c) + c.stored_size / 2] ^= 0x5a;
    write_file(bad, copy);
    refused(good + " " + bad, "fails its checksum");
    break;
  }
  write_file(bad, "not a trace file at all, just text\n");
  refused(good + " " + bad, "bad.ntr");
  refused(good + " " + testing::temp_path("missing.ntr"), "missing.ntr");
  refused(good + " " + second, "same file", second);  // the output may not be an input
  // A merge is not an input of another merge.
  std::string merged = testing::temp_path("m2.ntr");
  run(kCli + " merge " + good + " " + second + " -o " + merged + " >/dev/null");
  refused(good + " " + merged, "already a merge");

  // A merged file whose node chunks lie (checksums intact) is rejected when read.
  const std::string whole = read_file(merged);
  auto rejected = [&](const std::string& content, const std::string& expect) {
    write_file(bad, content);
    auto t = Trace::open(bad);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(expect), std::string::npos) << t.status().message();
    int code = 0;
    std::string err = testing::run_command(kCli + " stats " + bad + " 2>&1 >/dev/null", &code);
    EXPECT_NE(code, 0);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  };
  rejected(edit_node(whole, 1, [](file::NodePayload* n) { n->node = 70000; }), "out of range");
  rejected(edit_node(whole, 1, [](file::NodePayload* n) { n->node = 5; }), "without node 1");
  rejected(edit_node(whole, 1, [](file::NodePayload* n) { n->first_process = 0; }),
           "first process");
  rejected(edit_node(whole, 1, [](file::NodePayload* n) { n->first_process = 9; }),
           "has no process");
  rejected(edit_node(whole, 1, [](file::NodePayload* n) { n->pair_count = 1000; }), "clock pairs");
  rejected(edit_node(whole, 1,
                     [](file::NodePayload* n) {
                       n->origin_present = 1;
                       n->origin_process = 0;
                     }),
           "origin");
  rejected(edit_node(whole, 1, [](file::NodePayload* n) { n->align_den = 0; }), "alignment");
  rejected(edit_node(whole, 1, [](file::NodePayload* n) { n->hostname[0] = '\n'; }), "name");
  // Unterminated hostname.
  rejected(
      edit_node(whole, 0,
                [](file::NodePayload* n) { std::memset(n->hostname, 'x', sizeof(n->hostname)); }),
      "name");
  for (const std::string& f : {good, second, bad, merged}) unlink(f.c_str());
}

TEST(MergeTest, ExportsShowOneGroupPerNode) {
  // Two nodes whose processes have one pid (pid namespaces, or one process seen twice).
  Producer p(400);
  p.go();
  std::string a = snapshot(p.pid, "east"), b = snapshot(p.pid, "west");
  std::string merged = testing::temp_path("exp-merged.ntr");
  run(kCli + " merge " + a + " " + b + " -o " + merged + " >/dev/null");
  // CTF: a directory per node, each trace with its node's hostname, read together by the real
  // babeltrace2.
  std::string ctf = testing::temp_path("ctf");
  run(kCli + " export " + merged + " -f ctf -o " + ctf + " >/dev/null");
  std::string text = run("babeltrace2 " + ctf);
  std::map<std::string, int> per_host;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    for (const char* host : {"east", "west"}) {
      if (line.find(std::string(") ") + host + ":") != std::string::npos) ++per_host[host];
    }
  }
  EXPECT_EQ(per_host["east"], 800);
  EXPECT_EQ(per_host["west"], 800);
  std::string east_metadata = run("cat " + ctf + "/node-0-east/process-0-*/metadata");
  EXPECT_NE(east_metadata.find("hostname = \"east\""), std::string::npos) << east_metadata;
  // Chrome JSON: the processes named after their nodes, under distinct pids.
  std::string chrome = testing::temp_path("merged.json");
  run(kCli + " export " + merged + " -f chrome -o " + chrome + " >/dev/null");
  json doc = json::parse(read_file(chrome));
  std::map<uint64_t, std::string> names;
  std::map<uint64_t, int> records;
  for (const json& ev : doc["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "process_name") names[ev["pid"]] = ev["args"]["name"];
    if (ev["ph"] != "M") ++records[ev["pid"]];
  }
  ASSERT_EQ(names.size(), 2u);
  std::set<std::string> name_set;
  for (const auto& [pid, name] : names) {
    name_set.insert(name.substr(0, name.find(':')));
    EXPECT_EQ(records[pid], 800) << name;
  }
  EXPECT_EQ(name_set, (std::set<std::string>{"east", "west"}));
  // Perfetto: one process track per node's process, named after its node, labelled
  // node=HOST, under pids of their own; every thread track under its own node's process.
  std::string pf = testing::temp_path("merged.pftrace");
  run(kCli + " export " + merged + " -f perfetto -o " + pf + " >/dev/null");
  using nanotrace_export_test::Field;
  std::vector<Field> packets;
  ASSERT_TRUE(nanotrace_export_test::decode(read_file(pf), &packets));
  std::map<uint64_t, std::pair<uint64_t, std::string>> process_tracks;  // uuid -> pid, label
  std::map<uint64_t, std::string> process_names;                        // uuid -> name
  std::map<uint64_t, uint64_t> thread_parent;                           // thread uuid -> uuid
  for (const Field& packet : packets) {
    std::vector<Field> fields;
    ASSERT_TRUE(nanotrace_export_test::decode(packet.bytes, &fields));
    const Field* td = nanotrace_export_test::find(fields, 60);
    if (td == nullptr) continue;
    std::vector<Field> desc;
    ASSERT_TRUE(nanotrace_export_test::decode(td->bytes, &desc));
    const uint64_t uuid = nanotrace_export_test::find(desc, 1)->varint;
    if (const Field* pd = nanotrace_export_test::find(desc, 3)) {
      std::vector<Field> process;
      ASSERT_TRUE(nanotrace_export_test::decode(pd->bytes, &process));
      const Field* label = nanotrace_export_test::find(process, 8);
      process_tracks[uuid] = {nanotrace_export_test::find(process, 1)->varint,
                              label ? label->bytes : ""};
      process_names[uuid] = nanotrace_export_test::find(process, 6)->bytes;
    } else if (nanotrace_export_test::find(desc, 4) != nullptr) {
      thread_parent[uuid] = nanotrace_export_test::find(desc, 5)->varint;
    }
  }
  ASSERT_EQ(process_tracks.size(), 2u);
  std::set<uint64_t> pids;
  std::set<std::string> groups;
  for (const auto& [uuid, track] : process_tracks) {
    pids.insert(track.first);
    groups.insert(track.second);
    EXPECT_EQ(process_names[uuid].rfind(track.second.substr(5) + ": ", 0), 0u)
        << process_names[uuid];
  }
  EXPECT_EQ(pids.size(), 2u) << "two nodes' processes under one pid";
  EXPECT_TRUE(pids.count(static_cast<uint64_t>(p.pid)));
  EXPECT_EQ(groups, (std::set<std::string>{"node=east", "node=west"}));
  ASSERT_EQ(thread_parent.size(), 4u);
  std::map<uint64_t, int> threads_per_process;
  for (const auto& [thread, parent] : thread_parent) ++threads_per_process[parent];
  for (const auto& [uuid, track] : process_tracks) EXPECT_EQ(threads_per_process[uuid], 2);
  // CSV: a node column.
  std::string csv = testing::temp_path("merged.csv");
  run(kCli + " export " + merged + " -f csv -o " + csv + " >/dev/null");
  std::istringstream rows(read_file(csv));
  std::string header;
  std::getline(rows, header);
  EXPECT_EQ(header.rfind("time_ns,node,pid,tid,", 0), 0u) << header;
  std::map<std::string, int> csv_rows;
  for (std::string row; std::getline(rows, row);) {
    size_t a = row.find(','), b = row.find(',', a + 1);
    ++csv_rows[row.substr(a + 1, b - a - 1)];
  }
  EXPECT_EQ(csv_rows, (std::map<std::string, int>{{"east", 800}, {"west", 800}}));
  unlink(csv.c_str());
  run("rm -rf " + ctf);
  for (const std::string& f : {a, b, merged, chrome, pf}) unlink(f.c_str());
}

// Two nodes' recordings with kernel events (`run --kernel sched`: root, tracefs), the second
// of another boot (aligned through the wall clock): the merge keeps the kernel events of both,
// every record of each, its CPUs under its node, and each node's on the merged timeline within
// the span of its own recording. (A merge used to keep the first node's only.)
TEST(MergeTest, KernelEventsOfEveryNodeAreKept) {
  SKIP_WITHOUT_KERNEL_TRACING();
  std::vector<std::string> files;
  struct Kernel {
    uint64_t records = 0, first_ns = ~0ull, last_ns = 0;
  };
  std::vector<Kernel> own(2);
  for (int n = 0; n < 2; ++n) {
    const std::string file = testing::temp_path("knode" + std::to_string(n) + ".ntr");
    const std::string env = "NANOTRACE_NODE_NAME=knode" + std::to_string(n) +
                            (n == 1 ? " NANOTRACE_NODE_BOOT_ID=another-boot" : "");
    run(env + " " + kCli + " run --kernel sched -o " + file + " -- " + kProducer +
        " --threads 2 --events 3000 >/dev/null 2>&1");
    auto trace = testing::open_ok(file);
    ASSERT_TRUE(trace);
    ASSERT_FALSE(trace->kernel_events().empty()) << file;
    auto source = trace->read_all_with_kernel();
    Record r;
    while (source->next(&r)) own[n].records += r.event->is_kernel ? 1 : 0;
    ASSERT_GT(own[n].records, 0u) << file;
    files.push_back(file);
  }
  const std::string merged = testing::temp_path("knodes.ntr");
  std::string out = run(kCli + " merge " + files[0] + " " + files[1] + " -o " + merged + " 2>&1");
  EXPECT_EQ(out.find("left out"), std::string::npos) << out;
  file::FileHeader h;
  std::memcpy(&h, read_file(merged).data(), sizeof(h));
  EXPECT_EQ(h.version, file::kNodeKernelFileVersion);
  auto trace = testing::open_ok(merged);
  ASSERT_TRUE(trace);
  EXPECT_TRUE(trace->warning().empty()) << trace->warning();
  ASSERT_EQ(trace->nodes().size(), 2u);
  std::vector<Kernel> kept(2), user(2);
  auto source = trace->read_all_with_kernel();
  Record r;
  uint64_t last_ticks = 0;
  bool ordered = true;
  while (source->next(&r)) {
    const ThreadInfo& t = source->threads()[r.thread].info;
    const uint32_t node = trace->processes()[t.process].node;
    ASSERT_LT(node, 2u);
    Kernel& k = r.event->is_kernel ? kept[node] : user[node];
    ++k.records;
    k.first_ns = std::min(k.first_ns, r.time_ns);
    k.last_ns = std::max(k.last_ns, r.time_ns);
    ordered = ordered && r.ticks >= last_ticks;
    last_ticks = r.ticks;
  }
  EXPECT_TRUE(ordered);
  for (int n = 0; n < 2; ++n) {
    EXPECT_EQ(kept[n].records, own[n].records) << "node " << n;
    // The capture runs from before the command starts to after it ends: within a second of
    // the node's records, on the merged timeline.
    EXPECT_LT(kept[n].first_ns, user[n].first_ns + 1'000'000'000ull) << "node " << n;
    EXPECT_GT(kept[n].last_ns + 1'000'000'000ull, user[n].last_ns) << "node " << n;
    EXPECT_GT(user[n].first_ns + 1'000'000'000ull, kept[n].first_ns) << "node " << n;
  }
  // Each node's CPUs are numbered apart (one stream per CPU of the trace).
  std::set<uint32_t> slots;
  size_t cpus = 0;
  for (const ThreadStats& s : source->threads()) {
    if (!s.info.kernel) continue;
    slots.insert(s.info.slot);
    ++cpus;
  }
  EXPECT_EQ(slots.size(), cpus);
  EXPECT_EQ(trace->kernel_cpu_count(), cpus);
  for (const std::string& f : files) unlink(f.c_str());
  unlink(merged.c_str());
}

}  // namespace
}  // namespace nanotrace
