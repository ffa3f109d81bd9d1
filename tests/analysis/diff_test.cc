// `nanotrace diff` on planted regressions in real traces of stages_program (three stages per
// request, each a busy wait to a deadline): a delay added to one stage is named first with
// its size, a delay of 1.25 % of the requests moves the p99 and not the p50, and pairs of
// runs of one build are not called different (the false-positive rate over 20 pairs). Also
// the CLI's outputs (text, JSON, HTML), benchmark results, and bad input.
#include "nanotrace/diff.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/child_process.hpp"

namespace nanotrace {
namespace {

const std::string kBin = NANOTRACE_BIN_DIR;

class DiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nanotrace-diff-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs stages_program with args, keeping its segment; returns the segment's path.
  std::string record_segment(const std::string& args) {
    std::string out;
    const std::string segment =
        testing::run_keeping_segment(kBin + "/stages_program " + args, &out);
    EXPECT_FALSE(segment.empty()) << out;
    return segment;
  }

  // Two runs of the same arguments at the same time: two runs one after the other on a
  // machine whose speed and load change from one second to the next differ in truth (another
  // rate of preemptions stretches one run's tail), and a test of the statistics' false
  // positives must not count the machine's changes. Side by side, both see the same machine.
  std::pair<std::string, std::string> record_segments_together(const std::string& args) {
    auto first = std::async(std::launch::async, [&] { return record_segment(args); });
    std::string second = record_segment(args);
    return {first.get(), second};
  }
  std::pair<std::string, std::string> record_together(const std::string& args) {
    auto [a, b] = record_segments_together(args);
    return {to_file(a), to_file(b)};
  }

  // The same into a trace file; returns its path.
  std::string record(const std::string& args) { return to_file(record_segment(args)); }

  // A kept segment recovered into a trace file of the test's directory (the segment removed).
  std::string to_file(const std::string& segment) {
    std::string out;
    const std::string file = (dir_ / ("run" + std::to_string(++runs_) + ".ntr")).string();
    int code = 0;
    out = testing::run_command(kBin + "/nanotrace recover " + segment + " -o " + file + " 2>&1",
                               &code);
    EXPECT_EQ(code, 0) << out;
    std::filesystem::remove(segment);
    return file;
  }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  std::filesystem::path dir_;
  int runs_ = 0;
};

const DiffSubject* find(const DiffReport& r, const std::string& name) {
  for (const DiffSubject& s : r.subjects) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const DiffMetric& metric(const DiffSubject& s, const std::string& name) {
  for (const DiffMetric& m : s.metrics) {
    if (m.name == name) return m;
  }
  ADD_FAILURE() << "no metric " << name;
  return s.metrics.front();
}

std::string pair_name(const std::string& stage) {
  return "stage:" + stage + "_begin -> stage:" + stage + "_end by req";
}

TEST_F(DiffTest, PlantedStageDelayIsNamedFirstWithItsSize) {
  const std::string a = record("--requests 1500");
  const std::string b = record("--requests 1500 --delay-stage compute --delay-us 500");
  auto r = diff_runs({a}, {b}, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->subjects.size(), 3u);
  ASSERT_FALSE(r->ranked.empty()) << diff_headline(*r);
  const DiffSubject& first = r->subjects[r->ranked.front()];
  EXPECT_EQ(first.name, pair_name("compute"));
  const DiffMetric& p50 = metric(first, "p50");
  EXPECT_TRUE(p50.significant);
  EXPECT_NEAR(p50.delta, 500000, 50000);
  EXPECT_LE(p50.lo, p50.delta);
  EXPECT_GE(p50.hi, p50.delta);
  // Added time: 1500 requests x 500 us at least (a longer busy wait is also preempted more
  // often on a loaded machine: the mean grows by more than the median).
  EXPECT_GT(first.added, 0.9 * 1500 * 500000.0);
  for (const char* other : {"parse", "write"}) {
    const DiffSubject* s = find(*r, pair_name(other));
    ASSERT_NE(s, nullptr) << other;
    const DiffMetric& m = metric(*s, "p50");
    EXPECT_FALSE(m.significant) << other << ": " << m.a << " -> " << m.b << " p " << m.p;
  }
  EXPECT_NE(diff_headline(*r).find("compute"), std::string::npos);
}

TEST_F(DiffTest, TailOnlyRegressionMovesTheP99NotTheP50) {
  // Every 80th request (1.25 %): a delay of exactly 1 % would sit on the p99's nearest rank.
  // 30 ms: well above the preemptions of a loaded machine, which make A's own p99 (a 60 us
  // stage) reach several milliseconds.
  const std::string a = record("--requests 4000");
  const std::string b = record("--requests 4000 --tail-every 80 --tail-us 30000");
  auto r = diff_runs({a}, {b}, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DiffSubject* write = find(*r, pair_name("write"));
  ASSERT_NE(write, nullptr);
  const DiffMetric& p99 = metric(*write, "p99");
  EXPECT_TRUE(p99.significant) << p99.a << " -> " << p99.b << " p " << p99.p;
  EXPECT_GT(p99.delta, 15000000);
  EXPECT_TRUE(write->tail_significant);
  const DiffMetric& p50 = metric(*write, "p50");
  EXPECT_FALSE(p50.significant);
  EXPECT_LT(std::fabs(p50.relative), 0.02);
  ASSERT_FALSE(r->tail_ranked.empty());
  EXPECT_EQ(r->subjects[r->tail_ranked.front()].name, pair_name("write"));
}

TEST_F(DiffTest, SameBuildPairsAreRarelyCalledDifferent) {
  int flagged = 0;
  std::string examples;
  for (int pair = 0; pair < 20; ++pair) {
    const auto [a, b] = record_segments_together("--requests 400");
    auto r = diff_runs({a}, {b}, DiffOptions{});
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (!r->ranked.empty()) {
      ++flagged;
      examples += diff_headline(*r) + "\n";
    }
    std::filesystem::remove(a);
    std::filesystem::remove(b);
  }
  std::printf("same-build pairs flagged: %d of 20 (false-positive rate %.0f %%)\n%s", flagged,
              flagged * 5.0, examples.c_str());
  EXPECT_LE(flagged, 1) << examples;
}

TEST_F(DiffTest, CommandPrintsOneLineWhenNothingChangedAndJsonAndHtml) {
  const auto [a1, a2] = record_together("--requests 600");
  // 1.5 ms more a parse: with two runs a side (Student's t at 2 degrees of freedom), 400 us was
  // once lost in a loaded machine's noise.
  const auto [b1, b2] = record_together("--requests 600 --delay-stage parse --delay-us 1500");
  int code = 0;
  // One run against itself: nothing changed, whatever the machine did while it ran (two runs'
  // false-positive rate under noise is SameBuildPairsAreRarelyCalledDifferent's; under a
  // loaded machine a pair here was once called different, p90 60 us -> 216 us).
  std::string out =
      testing::run_command(kBin + "/nanotrace diff " + a1 + " " + a1 + " 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\nno significant change:"), std::string::npos) << out;
  // Two runs a side, as JSON: the library's document, parsed.
  const std::string html = (dir_ / "diff.html").string();
  out = testing::run_command(
      kBin + "/nanotrace diff " + a1 + "," + a2 + " " + b1 + "," + b2 + " --json --html " + html,
      &code);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["mode"], "traces");
  EXPECT_EQ(j["a"].size(), 2u);
  ASSERT_FALSE(j["ranked"].empty());
  const nlohmann::json& first = j["subjects"][j["ranked"][0].get<size_t>()];
  EXPECT_EQ(first["name"], pair_name("parse"));
  EXPECT_EQ(first["runs_a"], 2);
  EXPECT_EQ(first["count_b"], 1200);
  bool found_event = false;
  for (const auto& e : j["events"]) {
    if (e["event"] == "stage:parse_begin") {
      found_event = true;
      EXPECT_EQ(e["count_a"], 600.0);
    }
  }
  EXPECT_TRUE(found_event);
  std::ifstream in(html);
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("id=\"ranked\""), std::string::npos);
  EXPECT_NE(page.find("class=\"histogram\""), std::string::npos);
  EXPECT_EQ(std::filesystem::status(html).permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);
}

TEST_F(DiffTest, GivenPairAndBadInput) {
  const std::string a = record("--requests 300");
  int code = 0;
  std::string out = testing::run_command(
      kBin + "/nanotrace diff " + a + " " + a + " --pair stage:parse_begin,stage:write_end,req",
      &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("stage:parse_begin -> stage:write_end by req"), std::string::npos) << out;
  out = testing::run_command(
      kBin + "/nanotrace diff " + a + " " + a + " --pair stage:nope,stage:write_end,req 2>&1",
      &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("nanotrace: "), std::string::npos) << out;
  out = testing::run_command(kBin + "/nanotrace diff " + a + " /nonexistent.ntr 2>&1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  const std::string json = write("bench.json", R"({"benchmarks": []})");
  out = testing::run_command(kBin + "/nanotrace diff " + a + " " + json + " 2>&1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("not a mix"), std::string::npos) << out;
  const std::string garbage = write("garbage.json", "{\"benchmarks\": [1, 2");
  out = testing::run_command(kBin + "/nanotrace diff " + garbage + " " + json + " 2>&1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("not valid JSON"), std::string::npos) << out;
}

// Google Benchmark results with repetitions: a planted 30 % slowdown of one benchmark.
std::string google_benchmark(double scale_second, uint64_t seed) {
  nlohmann::json doc;
  doc["context"] = {{"library_build_type", "release"}};
  uint64_t x = seed;
  auto noise = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return 1 + 0.02 * (static_cast<double>(x >> 11) / 9007199254740992.0 - 0.5);
  };
  for (int rep = 0; rep < 10; ++rep) {
    for (const char* name : {"BM_Fast", "BM_Slow"}) {
      const double t = (std::string(name) == "BM_Fast" ? 120 : 2500 * scale_second) * noise();
      doc["benchmarks"].push_back({{"name", name},
                                   {"run_name", name},
                                   {"run_type", "iteration"},
                                   {"repetitions", 10},
                                   {"real_time", t},
                                   {"cpu_time", t},
                                   {"time_unit", "ns"}});
    }
  }
  doc["benchmarks"].push_back({{"name", "BM_Fast_mean"},
                               {"run_name", "BM_Fast"},
                               {"run_type", "aggregate"},
                               {"real_time", 1e9},
                               {"time_unit", "ns"}});
  return doc.dump();
}

TEST_F(DiffTest, BenchmarkResultsComparedWithTheSameStatistics) {
  const std::string a = write("a.json", google_benchmark(1.0, 1));
  const std::string b = write("b.json", google_benchmark(1.3, 2));
  auto r = diff_runs({a}, {b}, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->mode, "benchmarks");
  ASSERT_EQ(r->subjects.size(), 2u);  // the aggregate is not a sample
  ASSERT_EQ(r->ranked.size(), 1u) << diff_headline(*r);
  const DiffSubject& slow = r->subjects[r->ranked.front()];
  EXPECT_EQ(slow.name, "BM_Slow");
  EXPECT_EQ(slow.count_a, 10u);
  EXPECT_NEAR(metric(slow, "p50").relative, 0.3, 0.03);
  EXPECT_FALSE(find(*r, "BM_Fast")->significant);
}

// `make bench` writes aggregates only (--benchmark_report_aggregates_only): a file's median is
// one sample, so three files a side make three runs.
TEST_F(DiffTest, AggregatesOnlyBenchmarkResultsGiveOneSamplePerFile) {
  std::vector<std::string> a, b;
  for (int i = 0; i < 6; ++i) {
    nlohmann::json doc;
    const double t = (i < 3 ? 1000.0 : 1300.0) * (1 + 0.01 * (i % 3));
    for (const char* agg : {"mean", "median", "stddev"}) {
      doc["benchmarks"].push_back({{"name", std::string("BM_X_") + agg},
                                   {"run_name", "BM_X"},
                                   {"run_type", "aggregate"},
                                   {"aggregate_name", agg},
                                   {"real_time", std::string(agg) == "stddev" ? 5.0 : t},
                                   {"time_unit", "ns"}});
    }
    (i < 3 ? a : b).push_back(write("agg" + std::to_string(i) + ".json", doc.dump()));
  }
  auto r = diff_runs(a, b, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->subjects.size(), 1u);
  EXPECT_EQ(r->subjects[0].count_a, 3u);
  EXPECT_EQ(r->subjects[0].runs_a, 3u);
  EXPECT_NEAR(metric(r->subjects[0], "p50").relative, 0.3, 0.02);
  EXPECT_TRUE(r->subjects[0].significant) << diff_headline(*r);
  ASSERT_FALSE(r->notes.empty());
  EXPECT_NE(r->notes[0].find("aggregates only"), std::string::npos);
}

TEST_F(DiffTest, IographBenchResultsAreRuns) {
  // Three runs a side of the real `iograph bench --json`: one median per file and benchmark.
  std::vector<std::string> a, b;
  for (int i = 0; i < 6; ++i) {
    int code = 0;
    const std::string out = testing::run_command(
        kBin + "/iograph bench --json --shapes flat --backends sync --size 64 --repeat 5", &code);
    ASSERT_EQ(code, 0) << out;
    (i < 3 ? a : b).push_back(write("io" + std::to_string(i) + ".json", out));
  }
  auto r = diff_runs(a, b, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->subjects.size(), 1u);
  EXPECT_EQ(r->subjects[0].name, "flat/sync");
  EXPECT_EQ(r->subjects[0].runs_a, 3u);
  EXPECT_EQ(r->subjects[0].count_b, 3u);
}

}  // namespace
}  // namespace nanotrace
