// `nanotrace latency` against a brute-force computation from `nanotrace dump --json`, and the
// errors bad input gets (`nanotrace report` in headless Chromium: report_test.cc).
#include "export_fixture.hpp"

namespace nanotrace_export_test {
namespace {

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
  EXPECT_EQ(rep["lost"], 0);
  EXPECT_EQ(rep["lost_adjacent_pairs"], 0);
  EXPECT_EQ(rep["lost_adjacent_unmatched"], 0);
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

TEST_F(ExportTest, LatencySaysWhatTheTraceLost) {
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 2 --ops 20000 --gap-ns 0",
             "NANOTRACE_BUFFER=64K NANOTRACE_MODE=discard");
  uint64_t total = 0;
  for (auto& [tid, n] : loss_by_tid(sim.path())) total += n;
  ASSERT_GT(total, 0u) << "the rings were expected to overflow";
  const std::string args = " --begin io:submit --end io:complete --key req";
  Proc j = run(kCli + " latency " + sim.path() + args + " --json");
  ASSERT_EQ(j.code, 0) << j.err;
  json rep = json::parse(j.out);
  EXPECT_EQ(rep["lost"], total);
  EXPECT_EQ(rep["corrupt_blocks"], 0);
  // Records were dropped, so some begins or ends lost their partner, and they are said to
  // lie next to a loss.
  uint64_t unmatched =
      rep["overall"]["unmatched_begins"].get<uint64_t>() + rep["unmatched_ends"].get<uint64_t>();
  EXPECT_GT(unmatched, 0u);
  EXPECT_GT(rep["lost_adjacent_unmatched"].get<uint64_t>(), 0u);
  EXPECT_LE(rep["lost_adjacent_unmatched"].get<uint64_t>(), unmatched);
  Proc t = run(kCli + " latency " + sim.path() + args);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr(fmt::format("the trace lost {} records", total)));
  EXPECT_THAT(t.out, HasSubstr("unmatched records are next to one"));
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
      {"export" + src + " -f ctf -o " + sim.path(), "is the source being read"},
      {"export" + src + " -f ctf -o " + path("plain"), "exists and is not a directory"},
      {"export" + src + " -f jsonl -o /nonexistent-dir/x.jsonl",
       "cannot create /nonexistent-dir/x.jsonl"},
      {"report" + src + " -o /nonexistent-dir/r.html", "cannot create /nonexistent-dir/r.html"},
      {"report" + src + " -o " + path("r.html") + " --pair io:submit,io:complete,zzz",
       "has no field 'zzz'"},
      {"export /dev/shm/nanotrace-0 -f csv -o -", "nanotrace-0"},
  };
  std::ofstream(path("plain")) << "a file";
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

}  // namespace
}  // namespace nanotrace_export_test
