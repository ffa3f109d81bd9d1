// `nanotrace diff` on real traces of stages_program (three stages per request, each a busy
// wait to a deadline), recorded while the load changes between runs the way a shared CI
// machine's does: a CPU hog on every core during some runs and not others. Pairs of runs of
// one build are not called different (with one run a side and with several), a delay planted
// in one stage is named first with its size, a tail planted in 2 % of the requests moves the
// p99 and not the p50; with one run a side, every output says that nothing is attributable
// and still shows what differs. Also benchmark results, and bad input.
#include "nanotrace/diff.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/child_process.hpp"

namespace nanotrace {
namespace {

const std::string kBin = NANOTRACE_BIN_DIR;

// A CPU hog on every core the test may run on while it lives: one child per core spinning at
// the test's own priority (a niced one would take only idle time, and a busy CI machine has
// none).
class CpuHog {
 public:
  CpuHog() {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 2;
    for (int i = 0; i < cores; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        volatile uint64_t spins = 0;
        for (;;) spins = spins + 1;
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~CpuHog() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  CpuHog(const CpuHog&) = delete;
  CpuHog& operator=(const CpuHog&) = delete;

 private:
  std::vector<pid_t> pids_;
};

// Which runs of a pair meet the hog: each with chance 1/2, from a fixed seed. With several runs
// a side, drawn again when load and side coincide entirely (every run of one side loaded and
// none of the other's): that is the machine slowing down exactly when the build changed, which
// no statistic can tell from a slower build. With one run a side they are kept: nothing may be
// attributed there.
struct Loads {
  std::vector<bool> a, b;
  std::string text() const {
    std::string s;
    for (const auto* side : {&a, &b}) {
      for (bool l : *side) s += l ? 'H' : '.';
      s += side == &a ? "|" : "";
    }
    return s;
  }
};

Loads draw_loads(int runs, std::mt19937_64& rng) {
  for (;;) {
    Loads l{std::vector<bool>(runs), std::vector<bool>(runs)};
    int in_a = 0, in_b = 0;
    for (int r = 0; r < runs; ++r) {
      in_a += (l.a[r] = rng() & 1) ? 1 : 0;
      in_b += (l.b[r] = rng() & 1) ? 1 : 0;
    }
    if (runs == 1 || !((in_a == runs && in_b == 0) || (in_a == 0 && in_b == runs))) return l;
  }
}

class DiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = "nanotrace-diff-test-" + std::to_string(getpid());
    dir_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(dir_);
    shm_ = std::filesystem::path("/dev/shm") / name;
    std::filesystem::create_directory(shm_);
    std::filesystem::permissions(shm_, std::filesystem::perms::owner_all);
  }
  void TearDown() override {
    std::filesystem::remove_all(shm_);
    std::filesystem::remove_all(dir_);
  }

  // Runs stages_program with args, keeping its segment; returns the segment's path. The segment
  // is moved at once out of /dev/shm/nanotrace-<pid>, where `nanotrace clean` run by anyone
  // else on the machine removes it as left behind by a process that is gone (one run of the
  // loop lost a segment so).
  std::string record_segment(const std::string& args) {
    std::string out;
    const std::string left = testing::run_keeping_segment(kBin + "/stages_program " + args, &out);
    EXPECT_FALSE(left.empty()) << out;
    if (left.empty()) return left;
    const std::string segment = (shm_ / ("run" + std::to_string(++runs_))).string();
    std::filesystem::rename(left, segment);
    return segment;
  }

  // The runs of A and B, interleaved in time (A1 B1 A2 B2 ...) as a user comparing two builds
  // on one machine runs them, each beside the hog where `loads` says so.
  std::pair<std::vector<std::string>, std::vector<std::string>> record_runs(
      const std::string& args_a, const std::string& args_b, const Loads& loads) {
    std::vector<std::string> a, b;
    for (size_t r = 0; r < loads.a.size(); ++r) {
      for (const bool side_b : {false, true}) {
        std::optional<CpuHog> hog;
        if ((side_b ? loads.b : loads.a)[r]) hog.emplace();
        (side_b ? b : a).push_back(record_segment(side_b ? args_b : args_a));
      }
    }
    return {a, b};
  }

  void remove(const std::vector<std::string>& segments) {
    for (const std::string& s : segments) std::filesystem::remove(s);
  }

  // A kept segment recovered into a trace file of the test's directory (the segment removed).
  std::string record(const std::string& args) {
    const std::string segment = record_segment(args);
    const std::string file = (dir_ / ("run" + std::to_string(++runs_) + ".ntr")).string();
    int code = 0;
    const std::string out = testing::run_command(
        kBin + "/nanotrace recover " + segment + " -o " + file + " 2>&1", &code);
    EXPECT_EQ(code, 0) << out;
    std::filesystem::remove(segment);
    return file;
  }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  std::string read(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::filesystem::path dir_, shm_;
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

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_F(DiffTest, SameBuildPairsUnderChangingLoadAreRarelyCalledDifferent) {
  // 20 pairs of three runs a side; each pair also compared by its first run a side alone.
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(36);
  int flagged = 0, flagged_one = 0, observed_one = 0, differing_one = 0;
  std::string examples;
  for (int pair = 0; pair < 20; ++pair) {
    const Loads loads = draw_loads(3, rng);
    const auto [a, b] = record_runs("--requests 100", "--requests 100", loads);
    auto several = diff_runs(a, b, DiffOptions{});
    ASSERT_TRUE(several.ok()) << several.status().message();
    EXPECT_TRUE(several->attributable);
    if (!several->ranked.empty()) {
      ++flagged;
      examples += loads.text() + " " + diff_headline(*several) + "\n";
    }
    auto one = diff_runs({a[0]}, {b[0]}, DiffOptions{});
    ASSERT_TRUE(one.ok()) << one.status().message();
    EXPECT_FALSE(one->attributable);
    if (!one->ranked.empty()) {
      ++flagged_one;
      examples += loads.text() + " (first runs) " + diff_headline(*one) + "\n";
    }
    differing_one += loads.a[0] != loads.b[0] ? 1 : 0;
    observed_one += one->observed_ranked.empty() ? 0 : 1;
    remove(a);
    remove(b);
  }
  std::printf(
      "same-build pairs flagged: %d of 20 with three runs a side, %d of 20 with one run a side "
      "(observed, not attributable: %d; the first runs met different load in %d); %.1f s\n%s",
      flagged, flagged_one, observed_one, differing_one, seconds_since(start), examples.c_str());
  EXPECT_LE(flagged, 1) << examples;
  EXPECT_LE(flagged_one, 1) << examples;
}

TEST_F(DiffTest, PlantedStageDelayUnderChangingLoadIsNamedFirstWithItsSize) {
  // +50 us in the compute stage (20 us), four runs a side, half of them beside the hog. Short
  // stages: on a shared machine at load 40 a busy thread is preempted about every 0.4 ms of
  // its time, so a 40 us stage is preempted in some 10 % of the requests and its p90 flips
  // between tens of microseconds and milliseconds from run to run. Four runs that all landed
  // on one side of that cliff are four agreeing runs to any test of four runs a side (one
  // such parse p90 +1,534 % ranked before the planted change); stages of 5 us stay clear of
  // it, and the planted stage is the one that moves.
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(50);
  const Loads loads = draw_loads(4, rng);
  const std::string stages = "--requests 300 --parse-us 5 --compute-us 20 --write-us 5";
  const auto [a, b] = record_runs(stages, stages + " --delay-stage compute --delay-us 50", loads);
  auto r = diff_runs(a, b, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::printf("loads %s: %s (%.1f s)\n", loads.text().c_str(), diff_headline(*r).c_str(),
              seconds_since(start));
  ASSERT_EQ(r->subjects.size(), 3u);
  EXPECT_TRUE(r->attributable);
  EXPECT_EQ(r->degrees_of_freedom, 6);
  if (r->ranked.empty()) {
    for (const DiffSubject& s : r->subjects) {
      for (const DiffMetric& m : s.metrics) {
        std::printf("%s %s %.0f -> %.0f p %.3g [%.0f, %.0f] within p %.3g\n", s.name.c_str(),
                    m.name.c_str(), m.a, m.b, m.between.p, m.between.lo, m.between.hi, m.within.p);
      }
    }
  }
  ASSERT_FALSE(r->ranked.empty()) << diff_headline(*r);
  const DiffSubject& first = r->subjects[r->ranked.front()];
  EXPECT_EQ(first.name, pair_name("compute"));
  const DiffMetric& p50 = metric(first, "p50");
  EXPECT_TRUE(p50.significant);
  EXPECT_NEAR(p50.delta, 50000, 5000);
  EXPECT_LE(p50.between.lo, p50.delta);
  EXPECT_GE(p50.between.hi, p50.delta);
  EXPECT_GT(p50.between.lo, 0);
  for (const char* other : {"parse", "write"}) {
    const DiffSubject* s = find(*r, pair_name(other));
    ASSERT_NE(s, nullptr) << other;
    EXPECT_FALSE(metric(*s, "p50").significant) << other;
  }
  // The command's JSON and page of the same runs.
  int code = 0;
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  };
  const std::string html = (dir_ / "diff.html").string();
  const std::string out = testing::run_command(
      kBin + "/nanotrace diff " + join(a) + " " + join(b) + " --json --html " + html, &code);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["statistics"]["attributable"], true);
  EXPECT_EQ(j["statistics"]["runs_a"], 4);
  EXPECT_EQ(j["statistics"]["degrees_of_freedom"], 6.0);
  EXPECT_EQ(j["statistics"]["min_change_percent"], 5.0);
  ASSERT_FALSE(j["ranked"].empty());
  const nlohmann::json& top = j["subjects"][j["ranked"][0].get<size_t>()];
  EXPECT_EQ(top["name"], pair_name("compute"));
  EXPECT_EQ(top["runs_b"], 4);
  EXPECT_EQ(top["count_b"], 1200);  // 300 requests in each of 4 runs
  for (const auto& m : top["metrics"]) {
    if (m["metric"] != "p50") continue;
    EXPECT_EQ(m["significant"], true);
    EXPECT_EQ(m["interval"].size(), 2u);
    EXPECT_TRUE(m.contains("within_run"));
  }
  const std::string page = read(html);
  EXPECT_NE(page.find("id=\"ranked\""), std::string::npos);
  EXPECT_EQ(page.find("id=\"attribution\""), std::string::npos);
  EXPECT_NE(page.find("class=\"histogram\""), std::string::npos);
  EXPECT_EQ(std::filesystem::status(html).permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);
}

TEST_F(DiffTest, TailOnlyRegressionMovesTheP99NotTheP50) {
  // Every 50th request's write stage 2 ms longer, three runs a side. Stages of a few
  // microseconds: beside the hog, or on a shared machine at load 15-40, a busy thread is
  // preempted every 0.4-3 ms of its time for milliseconds, so a stage of 60 us is preempted
  // in some 2 % of the requests, which is itself a 2 % tail of milliseconds that moves from
  // run to run with the load: what is planted could not be told from it. A write stage of
  // 2 us is preempted in a few requests in a thousand, and its p99 is its own.
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(99);
  const Loads loads = draw_loads(3, rng);
  const std::string stages = "--requests 1000 --parse-us 5 --compute-us 10 --write-us 2";
  const auto [a, b] = record_runs(stages, stages + " --tail-every 50 --tail-us 2000", loads);
  auto r = diff_runs(a, b, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::printf("loads %s: %s (%.1f s)\n", loads.text().c_str(), diff_headline(*r).c_str(),
              seconds_since(start));
  const DiffSubject* write = find(*r, pair_name("write"));
  ASSERT_NE(write, nullptr);
  for (const DiffMetric& m : write->metrics) {
    std::printf("write %s %.0f -> %.0f p %.3g [%.0f, %.0f] within p %.3g\n", m.name.c_str(), m.a,
                m.b, m.between.p, m.between.lo, m.between.hi, m.within.p);
  }
  const DiffMetric& p99 = metric(*write, "p99");
  EXPECT_TRUE(p99.significant) << p99.a << " -> " << p99.b << " p " << p99.between.p;
  EXPECT_GT(p99.delta, 1000000);
  EXPECT_TRUE(write->tail_significant);
  const DiffMetric& p50 = metric(*write, "p50");
  EXPECT_FALSE(p50.significant);
  EXPECT_LT(std::fabs(p50.relative), 0.05);
  ASSERT_FALSE(r->tail_ranked.empty());
  EXPECT_EQ(r->subjects[r->tail_ranked.front()].name, pair_name("write"));
}

TEST_F(DiffTest, OneRunASideIsShownAsObservedNotAttributableInEveryOutput) {
  // The compute stage 50 us longer (20 -> 70 us; short stages, as in the four-run test).
  const std::string stages = "--requests 300 --parse-us 5 --compute-us 20 --write-us 5";
  const std::string a = record(stages);
  const std::string b = record(stages + " --delay-stage compute --delay-us 50");
  int code = 0;
  // Text: the headline says so, and the change is listed as observed.
  std::string out = testing::run_command(kBin + "/nanotrace diff " + a + " " + b, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\nnot attributable: one run a side"), std::string::npos) << out;
  EXPECT_NE(out.find("observed pair " + pair_name("compute")), std::string::npos) << out;
  EXPECT_NE(out.find("OBSERVED, NOT ATTRIBUTABLE"), std::string::npos) << out;
  EXPECT_EQ(out.find("\nfindings"), std::string::npos) << out;
  // JSON: no finding, no interval between runs; the change within runs, first observed.
  const std::string html = (dir_ / "one.html").string();
  out = testing::run_command(kBin + "/nanotrace diff " + a + " " + b + " --json --html " + html,
                             &code);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["statistics"]["attributable"], false);
  EXPECT_EQ(j["statistics"]["degrees_of_freedom"], 0.0);
  EXPECT_TRUE(j["ranked"].empty());
  ASSERT_FALSE(j["observed_ranked"].empty());
  const nlohmann::json& top = j["subjects"][j["observed_ranked"][0].get<size_t>()];
  EXPECT_EQ(top["name"], pair_name("compute"));
  EXPECT_EQ(top["significant"], false);
  EXPECT_EQ(top["observed"], true);
  for (const auto& m : top["metrics"]) {
    if (m["metric"] != "p50") continue;
    EXPECT_EQ(m["observed"], true);
    EXPECT_EQ(m["significant"], false);
    EXPECT_FALSE(m.contains("interval"));
    EXPECT_NEAR(m["delta"].get<double>(), 50000, 5000);
    const auto& w = m["within_run"]["interval"];
    EXPECT_LT(w[0].get<double>(), m["delta"].get<double>());
    EXPECT_GT(w[1].get<double>(), m["delta"].get<double>());
  }
  // The page: a warning, and the observed ranking in place of findings.
  const std::string page = read(html);
  EXPECT_NE(page.find("id=\"attribution\""), std::string::npos);
  EXPECT_NE(page.find("id=\"observed\""), std::string::npos);
  EXPECT_EQ(page.find("id=\"ranked\""), std::string::npos);
  EXPECT_NE(page.find("observed, not attributable"), std::string::npos);
  // --min-change is in percent, as statistics.min_change_percent: with 50, the p50's +250 % is
  // still observed (were it a fraction, 5,000 %, it would not be).
  out = testing::run_command(kBin + "/nanotrace diff " + a + " " + b + " --json --min-change 50",
                             &code);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json k = nlohmann::json::parse(out);
  EXPECT_EQ(k["statistics"]["min_change_percent"], 50.0);
  ASSERT_FALSE(k["observed_ranked"].empty()) << k["headline"];
  for (const auto& m : k["subjects"][k["observed_ranked"][0].get<size_t>()]["metrics"]) {
    if (m["metric"] == "p50") {
      EXPECT_EQ(m["observed"], true) << m;
    }
  }
  // One run against itself: nothing differs.
  out = testing::run_command(kBin + "/nanotrace diff " + a + " " + a + " 2>&1", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\nno significant change:"), std::string::npos) << out;
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
  // Three result files a side; one file a side is one run a side: observed, not attributed.
  std::vector<std::string> a, b;
  for (int i = 0; i < 3; ++i) {
    a.push_back(write("a" + std::to_string(i) + ".json", google_benchmark(1.0, 1 + 2 * i)));
    b.push_back(write("b" + std::to_string(i) + ".json", google_benchmark(1.3, 2 + 2 * i)));
  }
  auto r = diff_runs(a, b, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->mode, "benchmarks");
  ASSERT_EQ(r->subjects.size(), 2u);  // the aggregate is not a sample
  ASSERT_EQ(r->ranked.size(), 1u) << diff_headline(*r);
  const DiffSubject& slow = r->subjects[r->ranked.front()];
  EXPECT_EQ(slow.name, "BM_Slow");
  EXPECT_EQ(slow.count_a, 30u);
  EXPECT_NEAR(metric(slow, "p50").relative, 0.3, 0.03);
  EXPECT_FALSE(find(*r, "BM_Fast")->significant);
  r = diff_runs({a[0]}, {b[0]}, DiffOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->ranked.empty()) << diff_headline(*r);
  ASSERT_EQ(r->observed_ranked.size(), 1u) << diff_headline(*r);
  EXPECT_EQ(r->subjects[r->observed_ranked.front()].name, "BM_Slow");
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
