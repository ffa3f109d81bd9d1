// End-to-end tests of `nanotrace export`, `latency` and `report`: the real CLI on real traced
// processes (storage_sim and export_helper, segments kept with NANOTRACE_KEEP=1), with the
// outputs checked by babeltrace2 (CTF), nlohmann-json (Chrome JSON), a protobuf decoder
// (Perfetto), brute force from `nanotrace dump --json` (latency) and headless Chromium (the
// HTML report). No timing assertions.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nanotrace/nanotrace.hpp"
#include "nanotrace/reader.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const std::string kCli = NANOTRACE_BIN_DIR "/nanotrace";

struct Proc {
  int code = -1;
  std::string out;
  std::string err;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command; captures stdout and stderr.
Proc run(const std::string& cmd) {
  char tmpl[] = "/tmp/nanotrace-export-test-XXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  Proc r;
  FILE* p = popen((cmd + " 2>" + tmpl).c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(tmpl);
  unlink(tmpl);
  return r;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// A traced process run to completion with its segment kept; removed at destruction.
class Traced {
 public:
  explicit Traced(const std::string& command_line, const std::string& env = "") {
    Proc r = run("NANOTRACE_KEEP=1 " + env + " " + command_line);
    EXPECT_EQ(r.code, 0) << r.err;
    std::smatch m;
    static const std::regex kSegment("segment (\\S+)");
    if (std::regex_search(r.out, m, kSegment)) path_ = m[1];
    EXPECT_FALSE(path_.empty()) << r.out;
  }
  ~Traced() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("nanotrace-export-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::vector<json> dump_json(const std::string& source) {
    Proc r = run(kCli + " dump --json " + source);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<json> out;
    for (const std::string& l : lines(r.out)) out.push_back(json::parse(l));
    return out;
  }

  fs::path dir_;
};

// Per-thread loss of a segment, by tid, as the reader counts it.
std::map<uint32_t, uint64_t> loss_by_tid(const std::string& source) {
  std::map<uint32_t, uint64_t> out;
  auto trace = nanotrace::Trace::open(source);
  EXPECT_TRUE(trace.ok());
  if (!trace.ok()) return out;
  auto src = (*trace)->read_all();
  nanotrace::Record r;
  while (src->next(&r)) {
  }
  for (const auto& t : src->threads()) out[t.info.tid] += t.lost();
  return out;
}

// A field value as babeltrace2's pretty output prints it (strings quoted, bools as 0/1 since
// CTF 1.8 has no bool, doubles as %g).
std::string bt_value(const json& v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.rfind("0x", 0) == 0) return s;  // pointer
    return "\"" + s + "\"";
  }
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v.get<double>());
    return buf;
  }
  return v.dump();
}

// "time|tid|event|a = 1, b = "x"" (fields sorted by name) for a dump --json record.
std::string dump_key(const json& j) {
  std::vector<std::string> fields;
  for (auto it = j["fields"].begin(); it != j["fields"].end(); ++it) {
    std::string name = it.key();
    std::replace(name.begin(), name.end(), '.', '_');
    fields.push_back(name + " = " + bt_value(it.value()));
  }
  std::sort(fields.begin(), fields.end());
  std::string joined;
  for (const std::string& f : fields) joined += (joined.empty() ? "" : ", ") + f;
  return std::to_string(j["time_ns"].get<uint64_t>()) + "|" +
         std::to_string(j["tid"].get<uint32_t>()) + "|" + j["event"].get<std::string>() + "|" +
         joined;
}

// The same key from a line of `babeltrace2 --clock-cycles` output:
// [CYCLES] (+DELTA) HOST:PROC:(PID) EVENT: { tid = T }, { FIELDS }
std::string bt_key(const std::string& line) {
  static const std::regex kLine(
      R"(^\[(\d+)\] \(\+[^)]*\) \S+ ([^ ]+): \{ tid = (\d+) \}(?:, (\{.*\}))?$)");
  std::smatch m;
  if (!std::regex_match(line, m, kLine)) return "unparsed: " + line;
  std::string text = m[4].matched ? m[4].str() : "";
  // "{ a = 1, b = 2 }": split at ", " (the traced strings hold no comma).
  std::vector<std::string> fields;
  if (text.size() > 4) {
    text = text.substr(2, text.size() - 4);
    size_t start = 0;
    for (size_t comma; (comma = text.find(", ", start)) != std::string::npos; start = comma + 2) {
      fields.push_back(text.substr(start, comma - start));
    }
    fields.push_back(text.substr(start));
  }
  // A string field is preceded by its length field ("_dev_len = 7, dev = \"nvme0n1\""): drop
  // the length once it is checked, since dump has no such field.
  std::vector<std::string> kept;
  static const std::regex kLength(R"(^_(\w+)_len = (\d+)$)");
  for (size_t i = 0; i < fields.size(); ++i) {
    std::smatch lm;
    if (i + 1 < fields.size() && std::regex_match(fields[i], lm, kLength)) {
      std::string next = fields[i + 1];
      std::string prefix = lm[1].str() + " = \"";
      if (next.rfind(prefix, 0) == 0 && next.size() == prefix.size() + std::stoul(lm[2]) + 1) {
        continue;
      }
    }
    kept.push_back(fields[i]);
  }
  std::sort(kept.begin(), kept.end());
  std::string joined;
  for (const std::string& f : kept) joined += (joined.empty() ? "" : ", ") + f;
  return std::to_string(std::stoull(m[1].str())) + "|" + m[3].str() + "|" + m[2].str() + "|" +
         joined;
}

TEST_F(ExportTest, CtfRoundTripThroughBabeltrace) {
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 3 --ops 2000 --gap-ns 1000");
  std::string out = path("ctf");
  Proc e = run(kCli + " export " + sim.path() + " --format ctf -o " + out);
  ASSERT_EQ(e.code, 0) << e.err;
  std::string metadata = read_file(out + "/metadata");
  EXPECT_EQ(metadata.rfind("/* CTF 1.8", 0), 0u);

  Proc bt = run("babeltrace2 --clock-cycles " + out);
  ASSERT_EQ(bt.code, 0) << bt.err;
  EXPECT_EQ(bt.err, "") << "babeltrace2 warned";
  std::vector<std::string> got, want;
  for (const std::string& l : lines(bt.out)) got.push_back(bt_key(l));
  std::vector<json> records = dump_json(sim.path());
  for (const json& j : records) want.push_back(dump_key(j));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_GT(got.size(), 12000u);
  // babeltrace2 orders ties between streams its own way: compare as sorted lists.
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "record " << i;

  // Absolute clock: babeltrace2's seconds are the wall-clock time nanotrace gives.
  auto trace = nanotrace::Trace::open(sim.path());
  ASSERT_TRUE(trace.ok());
  uint64_t real =
      (*trace)->process().clock_start.realtime_ns + records[0]["time_ns"].get<uint64_t>();
  Proc secs = run("babeltrace2 --clock-seconds " + out + " | head -1");
  EXPECT_THAT(secs.out, HasSubstr(fmt::format("[{}.{:09}]", real / 1000000000, real % 1000000000)));
}

TEST_F(ExportTest, CtfCarriesExactLossCounts) {
  for (const char* mode : {"discard", "overwrite"}) {
    SCOPED_TRACE(mode);
    Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 2 --ops 20000 --gap-ns 0",
               std::string("NANOTRACE_BUFFER=64K NANOTRACE_MODE=") + mode);
    std::map<uint32_t, uint64_t> lost = loss_by_tid(sim.path());
    uint64_t total = 0;
    for (auto& [tid, n] : lost) total += n;
    ASSERT_GT(total, 0u) << "the rings were expected to overflow";
    std::string out = path(std::string("ctf-") + mode);
    Proc e = run(kCli + " export " + sim.path() + " --format ctf -o " + out);
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_THAT(e.err, HasSubstr(fmt::format("({} lost)", total)));
    Proc bt = run("babeltrace2 " + out + " >/dev/null");
    ASSERT_EQ(bt.code, 0) << bt.err;
    // Every warning is a counted discarded-events message; sum them per stream (tid).
    static const std::regex kWarn(
        R"re(^WARNING: Tracer discarded (\d+) events? between .* within stream "[^"]*/stream-\d+-(\d+)")re");
    std::map<uint32_t, uint64_t> reported;
    for (const std::string& l : lines(bt.err)) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(l, m, kWarn)) << "unexpected babeltrace2 output: " << l;
      reported[std::stoul(m[2])] += std::stoull(m[1]);
    }
    for (auto& [tid, n] : lost) EXPECT_EQ(reported[tid], n) << "tid " << tid;
  }
}

TEST_F(ExportTest, CtfFieldTypesAndNames) {
  Traced helper(NANOTRACE_BIN_DIR "/export_helper --pairs 16");
  std::string out = path("ctf");
  Proc e = run(kCli + " export " + helper.path() + " -f ctf -o " + out);
  ASSERT_EQ(e.code, 0) << e.err;
  std::string metadata = read_file(out + "/metadata");
  EXPECT_THAT(metadata, HasSubstr("int8_t i8;"));
  EXPECT_THAT(metadata, HasSubstr("double f32;"));  // recorded as a double
  EXPECT_THAT(metadata, HasSubstr("uint8_t __name_len;\n    utf8_char_t name[__name_len];"));
  EXPECT_THAT(metadata, HasSubstr("_event;"));  // a TSDL keyword, escaped
  EXPECT_THAT(metadata, HasSubstr("a_b;"));     // not an identifier, sanitised
  EXPECT_THAT(metadata, HasSubstr("absolute = true;"));
  Proc bt = run("babeltrace2 " + out);
  ASSERT_EQ(bt.code, 0) << bt.err;
  EXPECT_EQ(bt.err, "");
  EXPECT_THAT(bt.out, HasSubstr("test:types: { tid = ")) << bt.out.substr(0, 2000);
  EXPECT_THAT(bt.out,
              HasSubstr("{ i8 = -5, i16 = -300, i32 = -70000, i64 = -5000000000, u8 = 200, "
                        "u16 = 60000, u32 = 4000000000, u64 = 18000000000000000000, "
                        "f32 = 1.5, f64 = -2.25, flag = 1, _name_len = 11, name = \"hello world\", "
                        "ptr = 0x1234, event = 7, a_b = 9 }"));
  EXPECT_THAT(bt.out, HasSubstr("test:empty: { tid = "));
  EXPECT_THAT(bt.out,
              HasSubstr("{ _first_len = 0, first = \"\", _second_len = 63, second = "
                        "\"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_\", "
                        "small = 3, _last_len = 4, last = \"tail\" }"));
}

TEST_F(ExportTest, JsonlMatchesDumpAndCsvHasEveryRecord) {
  Traced helper(NANOTRACE_BIN_DIR "/export_helper --pairs 200");
  Proc j = run(kCli + " export " + helper.path() + " -f jsonl -o -");
  ASSERT_EQ(j.code, 0) << j.err;
  Proc d = run(kCli + " dump --json " + helper.path());
  ASSERT_EQ(d.code, 0);
  std::vector<std::string> jl = lines(j.out), dl = lines(d.out);
  ASSERT_EQ(jl.size(), dl.size());
  for (size_t i = 0; i < jl.size(); ++i) EXPECT_EQ(json::parse(jl[i]), json::parse(dl[i]));

  std::string csv = path("t.csv");
  Proc c = run(kCli + " export " + helper.path() + " -f csv -o " + csv);
  ASSERT_EQ(c.code, 0) << c.err;
  std::vector<std::string> rows = lines(read_file(csv));
  ASSERT_EQ(rows.size(), dl.size() + 1);
  EXPECT_EQ(rows[0].rfind("time_ns,tid,thread,seq,event,", 0), 0u);
  for (const char* column : {",id,", ",dev,", ",status,", ",i8,", ",a.b", ",fields.event,"}) {
    EXPECT_THAT(rows[0], HasSubstr(column));
  }
  json first = json::parse(dl[0]);
  EXPECT_EQ(rows[1].rfind(std::to_string(first["time_ns"].get<uint64_t>()) + ",", 0), 0u);
  EXPECT_THAT(read_file(csv), HasSubstr(",test:types,"));
}

TEST_F(ExportTest, ChromeJsonParsesWithSlicesAndThreadNames) {
  Traced helper(NANOTRACE_BIN_DIR
                "/export_helper --pairs 400 --unmatched-begins 5 --unmatched-ends 2");
  std::string out = path("t.json");
  Proc e = run(kCli + " export " + helper.path() + " -f chrome -o " + out +
               " --slice test:begin,test:end,id");
  ASSERT_EQ(e.code, 0) << e.err;
  json doc = json::parse(read_file(out));
  std::vector<json> records = dump_json(helper.path());
  std::set<uint32_t> tids;
  for (const json& r : records) tids.insert(r["tid"].get<uint32_t>());
  std::set<uint32_t> named;
  std::map<std::string, int> phases;
  std::vector<json> events;
  for (const json& ev : doc["traceEvents"]) {
    std::string ph = ev["ph"];
    if (ph == "M") {
      if (ev["name"] == "thread_name") named.insert(ev["tid"].get<uint32_t>());
      continue;
    }
    ++phases[ph];
    events.push_back(ev);
  }
  for (uint32_t t : tids) EXPECT_TRUE(named.count(t)) << "no thread_name for " << t;
  ASSERT_EQ(events.size(), records.size());
  EXPECT_EQ(phases["b"], 400 + 5);
  EXPECT_EQ(phases["e"], 400 + 2);
  EXPECT_EQ(phases["i"], static_cast<int>(records.size()) - 807);
  std::map<std::string, int> open;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& ev = events[i];
    const json& r = records[i];
    EXPECT_EQ(ev["tid"], r["tid"]);
    EXPECT_NEAR(ev["ts"].get<double>(), r["time_ns"].get<double>() / 1000.0, 0.0006);
    EXPECT_EQ(ev["args"], r["fields"]);
    if (ev["ph"] != "i") {
      EXPECT_EQ(ev["name"], "test:begin");
      EXPECT_EQ(ev["cat"], "test");
      EXPECT_EQ(ev["id"], std::to_string(r["fields"]["id"].get<uint64_t>()));
      open[ev["id"]] += ev["ph"] == "b" ? 1 : -1;
    } else {
      EXPECT_EQ(ev["name"], r["event"]);
    }
  }
  int unmatched_begins = 0, unmatched_ends = 0;
  for (auto& [id, n] : open) (n > 0 ? unmatched_begins : unmatched_ends) += n != 0;
  EXPECT_EQ(unmatched_begins, 5);
  EXPECT_EQ(unmatched_ends, 2);
  EXPECT_TRUE(doc["otherData"]["lost"].is_object());
}

// --- A small protobuf decoder for the Perfetto test. ---
struct Field {
  uint32_t number;
  uint32_t wire;
  uint64_t varint = 0;
  std::string bytes;
};

bool decode(const std::string& buf, std::vector<Field>* out) {
  size_t i = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= buf.size()) return false;
      auto b = static_cast<uint8_t>(buf[i++]);
      *v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (i < buf.size()) {
    uint64_t key;
    if (!varint(&key)) return false;
    Field f{static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7)};
    if (f.wire == 0) {
      if (!varint(&f.varint)) return false;
    } else if (f.wire == 1) {
      if (i + 8 > buf.size()) return false;
      std::memcpy(&f.varint, buf.data() + i, 8);
      i += 8;
    } else if (f.wire == 2) {
      uint64_t n;
      if (!varint(&n) || i + n > buf.size()) return false;
      f.bytes = buf.substr(i, n);
      i += n;
    } else {
      return false;
    }
    out->push_back(std::move(f));
  }
  return true;
}

const Field* find(const std::vector<Field>& fs, uint32_t number) {
  for (const Field& f : fs) {
    if (f.number == number) return &f;
  }
  return nullptr;
}

TEST_F(ExportTest, PerfettoProtobufDecodes) {
  Traced helper(NANOTRACE_BIN_DIR
                "/export_helper --pairs 300 --unmatched-begins 4 --unmatched-ends 3");
  std::string out = path("t.pftrace");
  Proc e = run(kCli + " export " + helper.path() + " -f perfetto -o " + out +
               " --slice test:begin,test:end,id");
  ASSERT_EQ(e.code, 0) << e.err;
  std::vector<json> records = dump_json(helper.path());
  std::vector<Field> packets;
  ASSERT_TRUE(decode(read_file(out), &packets));
  std::set<uint64_t> tids;
  std::map<uint64_t, std::string> track_names;
  std::map<uint64_t, int> depth;  // per track: open slices
  int begins = 0, ends = 0, instants = 0;
  bool types_checked = false;
  for (const Field& p : packets) {
    ASSERT_EQ(p.number, 1u);
    std::vector<Field> pf;
    ASSERT_TRUE(decode(p.bytes, &pf));
    const Field* seq = find(pf, 10);
    ASSERT_TRUE(seq && seq->varint == 1);
    if (const Field* td = find(pf, 60)) {
      std::vector<Field> d;
      ASSERT_TRUE(decode(td->bytes, &d));
      if (const Field* th = find(d, 4)) {
        std::vector<Field> t;
        ASSERT_TRUE(decode(th->bytes, &t));
        tids.insert(find(t, 2)->varint);
      }
      continue;
    }
    const Field* te = find(pf, 11);
    if (!te) continue;
    ASSERT_TRUE(find(pf, 8));  // timestamp
    std::vector<Field> ev;
    ASSERT_TRUE(decode(te->bytes, &ev));
    uint64_t type = find(ev, 9)->varint;
    uint64_t track = find(ev, 11)->varint;
    if (type == 1) {
      ++begins;
      EXPECT_EQ(find(ev, 23)->bytes, "test:begin");
      EXPECT_EQ(++depth[track], 1) << "slices on one lane must not overlap";
    } else if (type == 2) {
      ++ends;
      EXPECT_EQ(--depth[track], 0);
    } else {
      ASSERT_EQ(type, 3u);
      ++instants;
      if (find(ev, 23)->bytes == "test:types") {
        std::map<std::string, Field> ann;
        for (const Field& f : ev) {
          if (f.number != 4) continue;
          std::vector<Field> a;
          ASSERT_TRUE(decode(f.bytes, &a));
          ann[find(a, 10)->bytes] = a.size() > 1 ? a[1] : Field{};
        }
        EXPECT_EQ(static_cast<int64_t>(ann["i64"].varint), -5000000000);
        EXPECT_EQ(ann["i64"].number, 4u);
        EXPECT_EQ(ann["u64"].varint, 18000000000000000000ull);
        EXPECT_EQ(ann["u64"].number, 3u);
        double d;
        std::memcpy(&d, &ann["f64"].varint, 8);
        EXPECT_EQ(d, -2.25);
        EXPECT_EQ(ann["name"].bytes, "hello world");
        EXPECT_EQ(ann["flag"].number, 2u);
        EXPECT_EQ(ann["ptr"].varint, 0x1234u);
        types_checked = true;
      }
    }
  }
  std::set<uint64_t> want_tids;
  for (const json& r : records) want_tids.insert(r["tid"].get<uint64_t>());
  for (uint64_t t : want_tids) EXPECT_TRUE(tids.count(t)) << t;
  EXPECT_TRUE(types_checked);
  EXPECT_EQ(begins, 304);
  EXPECT_EQ(ends, 300);  // the unmatched ends are instants; unmatched begins stay open
  EXPECT_EQ(begins + ends + instants, static_cast<int>(records.size()));
}

// Nearest-rank percentile of sorted values.
uint64_t rank(const std::vector<uint64_t>& v, double p) {
  size_t k = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::max<size_t>(k, 1) - 1];
}

TEST_F(ExportTest, LatencyMatchesBruteForce) {
  Traced helper(NANOTRACE_BIN_DIR
                "/export_helper --pairs 3001 --unmatched-begins 7 --unmatched-ends 3");
  Proc l = run(kCli + " latency " + helper.path() +
               " --begin test:begin --end test:end --key id --by dev --top 5 --json");
  ASSERT_EQ(l.code, 0) << l.err;
  json rep = json::parse(l.out);
  // Brute force from the records.
  std::map<uint64_t, std::pair<uint64_t, std::string>> open;
  std::vector<uint64_t> all;
  std::map<std::string, std::vector<uint64_t>> by_dev;
  uint64_t unmatched_ends = 0;
  for (const json& r : dump_json(helper.path())) {
    if (r["event"] == "test:begin") {
      open[r["fields"]["id"]] = {r["time_ns"], r["fields"]["dev"]};
    } else if (r["event"] == "test:end") {
      auto it = open.find(r["fields"]["id"]);
      if (it == open.end()) {
        ++unmatched_ends;
        continue;
      }
      uint64_t lat = r["time_ns"].get<uint64_t>() - it->second.first;
      all.push_back(lat);
      by_dev[it->second.second].push_back(lat);
      open.erase(it);
    }
  }
  std::sort(all.begin(), all.end());
  const json& o = rep["overall"];
  EXPECT_EQ(o["count"], 3001);
  EXPECT_EQ(all.size(), 3001u);
  EXPECT_EQ(o["unmatched_begins"], 7);
  EXPECT_EQ(rep["unmatched_ends"], 3);
  EXPECT_EQ(unmatched_ends, 3u);
  EXPECT_EQ(o["min_ns"], all.front());
  EXPECT_EQ(o["max_ns"], all.back());
  EXPECT_EQ(o["p50_ns"], rank(all, 50));
  EXPECT_EQ(o["p90_ns"], rank(all, 90));
  EXPECT_EQ(o["p99_ns"], rank(all, 99));
  EXPECT_EQ(o["p999_ns"], rank(all, 99.9));
  uint64_t in_histogram = 0;
  for (const json& b : o["histogram"]) in_histogram += b["count"].get<uint64_t>();
  EXPECT_EQ(in_histogram, 3001u);
  ASSERT_EQ(rep["groups"].size(), by_dev.size());
  for (const json& g : rep["groups"]) {
    std::vector<uint64_t> v = by_dev[g["value"]];
    std::sort(v.begin(), v.end());
    EXPECT_EQ(g["count"], v.size());
    EXPECT_EQ(g["p99_ns"], rank(v, 99)) << g["value"];
    EXPECT_EQ(g["max_ns"], v.back());
  }
  ASSERT_EQ(rep["top"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(rep["top"][i]["latency_ns"], all[all.size() - 1 - i]);

  Proc text =
      run(kCli + " latency " + helper.path() + " --begin test:begin --end test:end --key id");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("3001 pairs, 7 unmatched begins, 3 unmatched ends"));
  EXPECT_THAT(text.out, HasSubstr("histogram"));
  EXPECT_THAT(text.out, HasSubstr("#"));
}

TEST_F(ExportTest, BadInputGivesOneLineErrors) {
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 1 --ops 50 --gap-ns 0");
  const std::string src = " " + sim.path();
  struct Case {
    std::string args;
    std::string message;
  } cases[] = {
      {"latency" + src + " --begin io:nope --end io:complete --key req",
       "no event 'io:nope' in this trace (known events: app:start, app:stop"},
      {"latency" + src + " --begin io:submit --end io:complete --key nope",
       "event io:submit has no field 'nope' (its fields: req, dev, offset, len)"},
      {"latency" + src + " --begin io:submit --end io:complete --key req --by nope",
       "begin event io:submit has no field 'nope'"},
      {"latency" + src + " --begin io:submit --key req", "--end is required"},
      {"latency" + src + " --begin io:submit --end app:stop --key req",
       "event app:stop has no field 'req'"},
      {"export" + src + " -f chrome -o " + path("x.json") + " --slice io:submit",
       "bad pair rule 'io:submit'"},
      {"export" + src + " -f chrome -o " + path("x.json") + " --slice io:submit,io:zzz,req",
       "no event 'io:zzz'"},
      {"export" + src + " -f xml -o " + path("x"), "unknown export format 'xml'"},
      {"export" + src + " -f ctf -o /proc/nanotrace/ctf",
       "cannot create directory /proc/nanotrace/ctf"},
      {"export" + src + " -f ctf -o " + sim.path(), "exists and is not a directory"},
      {"export" + src + " -f jsonl -o /nonexistent-dir/x.jsonl",
       "cannot create /nonexistent-dir/x.jsonl"},
      {"report" + src + " -o /nonexistent-dir/r.html", "cannot create /nonexistent-dir/r.html"},
      {"report" + src + " -o " + path("r.html") + " --pair io:submit,io:complete,zzz",
       "has no field 'zzz'"},
      {"export /dev/shm/nanotrace-0 -f csv -o -", "nanotrace-0"},
  };
  for (const Case& c : cases) {
    Proc r = run(kCli + " " + c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_LE(lines(r.err).size(), 2u) << r.err;
  }
}

TEST_F(ExportTest, EmptyTraceIsAnError) {
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 1 --ops 10", "NANOTRACE_GROUPS=none");
  for (const std::string& args :
       {" -f ctf -o " + path("ctf"), std::string(" -f chrome -o ") + path("c.json")}) {
    Proc r = run(kCli + " export " + sim.path() + args);
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("holds no records"));
  }
  Proc l = run(kCli + " latency " + sim.path() + " --begin io:submit --end io:complete --key req");
  EXPECT_EQ(l.code, 1);
  EXPECT_THAT(l.err, HasSubstr("holds no records"));
  Proc rep = run(kCli + " report " + sim.path() + " -o " + path("r.html"));
  EXPECT_EQ(rep.code, 1);
  EXPECT_THAT(rep.err, HasSubstr("holds no records"));
  EXPECT_FALSE(fs::exists(path("r.html")));
}

TEST_F(ExportTest, ReportRendersInChromium) {
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 2 --ops 3000 --gap-ns 2000");
  std::string html = path("report.html");
  Proc r = run(kCli + " report " + sim.path() + " -o " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string page = read_file(html);
  // Self-contained: no script, no external resource.
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);

  const char* chromium = "/usr/bin/chromium";
  if (access(chromium, X_OK) != 0) GTEST_SKIP() << "chromium is not installed (/usr/bin/chromium)";
  std::string profile = path("profile");
  fs::create_directories(profile);
  std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir=" +
      profile;
  Proc dom = run(std::string("timeout 120 ") + chromium + flags + " --dump-dom file://" + html);
  ASSERT_EQ(dom.code, 0) << dom.err;
  // The numbers the records give, as rendered.
  std::vector<json> records = dump_json(sim.path());
  EXPECT_THAT(dom.out, HasSubstr("<td id=\"records\">" + std::to_string(records.size()) + "</td>"));
  EXPECT_THAT(dom.out, HasSubstr("<td id=\"lost\">0</td>"));
  EXPECT_THAT(dom.out, HasSubstr("io:submit -&gt; io:complete by req"));  // inferred pair
  EXPECT_THAT(dom.out, HasSubstr("<td>6000</td>"));                       // its pair count
  EXPECT_THAT(dom.out, HasSubstr("<svg id=\"timeline\""));
  EXPECT_THAT(dom.out, HasSubstr("class=\"slice\""));
  EXPECT_THAT(dom.out, HasSubstr("<svg class=\"histogram\""));
  for (const char* thread : {"worker-0", "worker-1"}) EXPECT_THAT(dom.out, HasSubstr(thread));

  std::string artifacts = NANOTRACE_ARTIFACT_DIR;
  fs::create_directories(artifacts);
  std::string png = artifacts + "/report.png";
  fs::remove(png);
  Proc shot = run(std::string("timeout 120 ") + chromium + flags + " --screenshot=" + png +
                  " --window-size=1280,2000 file://" + html);
  ASSERT_EQ(shot.code, 0) << shot.err;
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 10000u);
  fs::copy_file(html, artifacts + "/report.html", fs::copy_options::overwrite_existing);
}

// The exact text of every kind of value in Chrome JSON: escapes, invalid UTF-8 (U+FFFD), the
// longest string, extreme integers, doubles (shortest round trip; non-finite ones quoted),
// pointers, and a string slice id. Traced by this process, exported from its own segment.
TEST_F(ExportTest, ChromeJsonEncodesEveryValueExactly) {
  const std::string escapes(nanotrace::abi::kMaxStringBytes, '\x01');  // the most a record expands
  NANOTRACE(edge, strings, "quote={} ctl={} utf8={} bad={} cut={} empty={} worst={} long={}",
            "a\"b\\c/d", "\n\t\r\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
            "\xff\xfe ok \xed\xa0\x80", "x\xc3", "", escapes, std::string(100, 'z'));
  NANOTRACE(edge, ints, "i8={} min={} max={} neg={} u64={} u8={}", int8_t{-128},
            std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), int32_t{-1},
            std::numeric_limits<uint64_t>::max(), uint8_t{255});
  NANOTRACE(edge, doubles,
            "zero={} negzero={} tenth={} small={} big={} half={} milli={} e15={} most={} nan={} "
            "inf={} ninf={} f32={} tiny={} max={}",
            0.0, -0.0, 0.1, 1e-7, 1e300, 12.5, -0.001, 1e15, 999999999999.999,
            std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
            -std::numeric_limits<double>::infinity(), 0.1f,
            std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max());
  NANOTRACE(edge, misc, "null={} ptr={} maxptr={} yes={} no={}", static_cast<void*>(nullptr),
            reinterpret_cast<void*>(0xdeadbeef), reinterpret_cast<void*>(~uintptr_t{0}), true,
            false);
  NANOTRACE(edge, open, "name={}", "req \"7\"");
  NANOTRACE(edge, close, "name={}", "req \"7\"");

  std::string out = path("edge.json");
  Proc e = run(kCli + " export " + std::to_string(getpid()) + " -f chrome -o " + out +
               " --slice edge:open,edge:close,name");
  ASSERT_EQ(e.code, 0) << e.err;
  std::string text = read_file(out);
  for (const std::string& expected : std::vector<std::string>{
           std::string(R"("quote":"a\"b\\c/d")"),
           std::string(R"("ctl":"\n\t\r\u0001\u001f)") + "\x7f\"",
           std::string("\"utf8\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""),
           std::string(R"("bad":"\ufffd\ufffd ok \ufffd\ufffd\ufffd")"),
           std::string(R"("cut":"x\ufffd","empty":"",)"),
           R"("i8":-128,"min":-9223372036854775808,"max":9223372036854775807,"neg":-1,)"
           R"("u64":18446744073709551615,"u8":255})",
           R"("zero":0,"negzero":-0,"tenth":0.1,"small":1e-07,"big":1e+300,"half":12.5,)"
           R"("milli":-0.001,"e15":1000000000000000,"most":999999999999.999,"nan":"nan",)"
           R"("inf":"inf","ninf":"-inf","f32":0.10000000149011612,"tiny":5e-324,)"
           R"("max":1.7976931348623157e+308})",
           R"("null":"0x0","ptr":"0xdeadbeef","maxptr":"0xffffffffffffffff","yes":true,)"
           R"("no":false})",
           R"("ph":"b",)",
           R"("id":"req \"7\"")",
       }) {
    EXPECT_THAT(text, HasSubstr(expected));
  }
  json doc = json::parse(text);  // also rejects invalid UTF-8
  std::map<std::string, json> args;
  for (const json& ev : doc["traceEvents"]) {
    if (ev["ph"] != "M") args[ev["name"]] = ev["args"];
  }
  ASSERT_EQ(args.count("edge:strings"), 1u) << text.substr(0, 2000);
  const json& s = args["edge:strings"];
  EXPECT_EQ(s["quote"], "a\"b\\c/d");
  EXPECT_EQ(s["ctl"], "\n\t\r\x01\x1f\x7f");
  EXPECT_EQ(s["bad"], "\xef\xbf\xbd\xef\xbf\xbd ok \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(s["worst"], escapes);
  EXPECT_EQ(s["long"], std::string(nanotrace::abi::kMaxStringBytes, 'z'));
  EXPECT_EQ(args["edge:ints"]["min"].get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(args["edge:ints"]["u64"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  const json& d = args["edge:doubles"];
  EXPECT_EQ(d["most"].get<double>(), 999999999999.999);
  EXPECT_EQ(d["f32"].get<double>(), static_cast<double>(0.1f));
  EXPECT_EQ(d["tiny"].get<double>(), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(d["max"].get<double>(), std::numeric_limits<double>::max());
}

}  // namespace
