// Benchmark results as diff subjects: Google Benchmark's JSON (`make bench`,
// --benchmark_format=json or --benchmark_out) and `iograph bench --json`. Each file is one
// run; its samples are the benchmark's repetitions (Google Benchmark's "iteration" entries,
// in the file's order: the aggregates are not samples; a file of aggregates only gives its
// median) or, for iograph, the one median per shape and backend. Times are kept in picoseconds
// (integers that still resolve a benchmark of under a nanosecond).
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/diff_subjects.hpp"

namespace nanotrace::diff {
namespace {

using Json = nlohmann::json;

double to_ps(double value, const std::string& unit) {
  if (unit == "ns") return value * 1e3;
  if (unit == "us") return value * 1e6;
  if (unit == "ms") return value * 1e9;
  if (unit == "s") return value * 1e12;
  return -1;
}

// One file's samples per benchmark name, in the file's order.
using Samples = std::map<std::string, std::vector<uint64_t>>;

// Repetitions where the file has them; a file of aggregates only
// (--benchmark_report_aggregates_only) gives its median, one sample (noted).
Status google_benchmark(const Json& doc, const std::string& path, Samples* out,
                        std::vector<std::string>* notes) {
  Samples medians;
  for (const Json& b : doc.at("benchmarks")) {
    if (!b.is_object()) {
      return Status::Corrupt(fmt::format("{}: a benchmark is not an object", path));
    }
    if (b.value("error_occurred", false)) continue;
    const std::string type = b.value("run_type", "iteration");
    if (type == "aggregate" && b.value("aggregate_name", "") != "median") continue;
    const std::string name = b.value("run_name", b.value("name", ""));
    const double ps = to_ps(b.at("real_time").get<double>(), b.value("time_unit", "ns"));
    if (name.empty() || ps < 0 || !std::isfinite(ps)) {
      return Status::Corrupt(fmt::format("{}: benchmark '{}' has no usable real_time", path, name));
    }
    (type == "aggregate" ? medians : *out)[name].push_back(static_cast<uint64_t>(std::llround(ps)));
  }
  bool aggregates_only = false;
  for (auto& [name, v] : medians) {
    if (out->count(name) != 0) continue;
    (*out)[name] = std::move(v);
    aggregates_only = true;
  }
  if (aggregates_only) {
    notes->push_back(fmt::format(
        "{}: aggregates only (--benchmark_report_aggregates_only): its median is one sample; "
        "give several files a side, or keep the repetitions",
        path));
  }
  return Status::Ok();
}

Status iograph_bench(const Json& doc, const std::string& path, Samples* out) {
  for (const Json& r : doc.at("results")) {
    const std::string name =
        fmt::format("{}/{}", r.at("shape").get<std::string>(), r.at("backend").get<std::string>());
    const double ps = to_ps(r.at("median_us").get<double>(), "us");
    if (ps < 0 || !std::isfinite(ps)) {
      return Status::Corrupt(fmt::format("{}: {} has no usable median_us", path, name));
    }
    (*out)[name].push_back(static_cast<uint64_t>(std::llround(ps)));
  }
  return Status::Ok();
}

Status load_file(const std::string& path, Samples* out, std::vector<std::string>* notes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(fmt::format("{}: cannot be read", path));
  Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Corrupt(fmt::format("{}: not valid JSON", path));
  }
  try {
    if (doc.contains("benchmarks") && doc["benchmarks"].is_array()) {
      return google_benchmark(doc, path, out, notes);
    }
    if (doc.contains("results") && doc["results"].is_array()) return iograph_bench(doc, path, out);
  } catch (const Json::exception& e) {
    return Status::Corrupt(fmt::format("{}: not a benchmark result ({})", path, e.what()));
  }
  return Status::Corrupt(fmt::format(
      "{}: neither a Google Benchmark result (\"benchmarks\") nor an iograph bench result "
      "(\"results\")",
      path));
}

}  // namespace

Status load_benchmarks(const std::vector<std::string>& a, const std::vector<std::string>& b,
                       std::vector<SubjectSamples>* subjects, std::vector<std::string>* notes) {
  std::vector<Samples> runs_a, runs_b;
  for (auto [paths, runs] : {std::pair{&a, &runs_a}, std::pair{&b, &runs_b}}) {
    for (const std::string& p : *paths) {
      runs->emplace_back();
      if (Status s = load_file(p, &runs->back(), notes); !s.ok()) return s;
    }
  }
  // The benchmarks present in every run of both sides, in the first file's order by name.
  std::map<std::string, int> present;
  for (const auto* runs : {&runs_a, &runs_b}) {
    for (const Samples& s : *runs) {
      for (const auto& [name, v] : s) ++present[name];
    }
  }
  const int all = static_cast<int>(runs_a.size() + runs_b.size());
  for (const auto& [name, n] : present) {
    if (n != all) {
      notes->push_back(fmt::format("benchmark {} is not in every result: not compared", name));
      continue;
    }
    SubjectSamples s;
    s.kind = "benchmark";
    s.name = name;
    s.unit = "ps";
    for (const Samples& r : runs_a) s.a.add_run(r.at(name));
    for (const Samples& r : runs_b) s.b.add_run(r.at(name));
    subjects->push_back(std::move(s));
  }
  return Status::Ok();
}

}  // namespace nanotrace::diff
