// diff_runs: opens both sides' runs, finds what they have in common (events, pairs, I/O
// stages) and gathers each subject's samples through the analysis layer (PairMatcher for
// pairs, analyze_breakdown for stages, analyze_stats-like counts for events, diff_threads.cc
// for threads), then compares them (diff_subjects.hpp). Benchmark results go to
// diff_bench.cc.
#include "nanotrace/diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "analysis/diff_subjects.hpp"
#include "nanotrace/breakdown.hpp"
#include "nanotrace/columns.hpp"

namespace nanotrace {
namespace {

using diff::SubjectSamples;

// The pairs the analysis layer knows beyond those inferred from event names (infer_pairs:
// the interposer's GROUP:begin/GROUP:end by call, X_begin/X_end...): iograph's nodes, the
// interposer's io_uring requests, the kernel's io_uring requests and block requests.
const PairRule kKnownPairs[] = {
    {"iograph:node_submit", "iograph:node_complete", "node"},
    {"io_uring:sqe", "io_uring:cqe", "user_data"},
    {"io_uring:io_uring_submit_req", "io_uring:io_uring_complete", "user_data"},
    {"block:block_rq_issue", "block:block_rq_complete", "dev+sector"},
};

bool looks_like_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c)) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  }
  return false;
}

// Records per event name (user and kernel events) and the span of the run.
struct EventCounts {
  std::map<std::string, uint64_t> count;
  uint64_t first_ns = 0, last_ns = 0;
  double span_s() const { return last_ns > first_ns ? (last_ns - first_ns) / 1e9 : 0; }
};

EventCounts count_events(Trace& trace) {
  EventCounts out;
  bool any = false;
  auto note_time = [&](uint64_t t) {
    if (!any || t < out.first_ns) out.first_ns = t;
    out.last_ns = std::max(out.last_ns, t);
    any = true;
  };
  if (!trace.kernel_events().empty()) {
    // Merged with the kernel's records: the record-by-record statistics.
    const TraceStats s = analyze_stats(trace);
    for (const EventCount& e : s.events) out.count[e.event] = e.rate.count;
    out.first_ns = s.total.first_ns;
    out.last_ns = s.total.last_ns;
    return out;
  }
  // User events only: as columns without fields (counting rows is all it takes).
  ColumnOptions options;
  options.fields = {"\x01"};  // no field has this name: times and ids only
  auto reader = ColumnReader::open(trace, options);
  if (!reader.ok()) return out;
  ColumnSet batch;
  bool more = true;
  while (more) {
    more = (*reader)->next(&batch, 1 << 16);
    for (const EventTable& t : batch.tables) {
      if (t.rows() == 0) continue;
      out.count[t.name] += t.rows();
      note_time(t.time_ns[0]);
      note_time(t.time_ns[t.rows() - 1]);
    }
  }
  return out;
}

struct Side {
  std::vector<std::unique_ptr<Trace>> traces;
  std::vector<EventCounts> counts;
};

Result<Side> open_side(const std::vector<std::string>& paths) {
  Side side;
  for (const std::string& path : paths) {
    auto trace = Trace::open(path);
    if (!trace.ok()) {
      return Status(trace.status().code(), fmt::format("{}: {}", path, trace.status().message()));
    }
    side.counts.push_back(count_events(**trace));
    side.traces.push_back(std::move(*trace));
  }
  return side;
}

// A rule has records of its begin and end events in every run of the side.
bool occurs(const Side& side, const PairRule& rule) {
  for (size_t i = 0; i < side.traces.size(); ++i) {
    const auto& c = side.counts[i].count;
    if (!c.count(rule.begin) || !c.count(rule.end)) return false;
    if (!resolve_pair_with_kernel(*side.traces[i], rule).ok()) return false;
  }
  return true;
}

std::vector<PairRule> candidate_rules(const Side& a, const Side& b) {
  std::vector<PairRule> rules(std::begin(kKnownPairs), std::end(kKnownPairs));
  for (const Side* side : {&a, &b}) {
    for (const auto& trace : side->traces) {
      for (const PairRule& r : infer_pairs(*trace)) rules.push_back(r);
    }
  }
  std::vector<PairRule> out;
  std::set<std::string> seen;
  for (const PairRule& r : rules) {
    if (seen.insert(r.label()).second) out.push_back(r);
  }
  return out;
}

// Every run's latencies of one rule into a SampleSet.
Status pair_samples(Side& side, const PairRule& rule, diffstats::SampleSet* set) {
  for (auto& trace : side.traces) {
    auto matcher = PairMatcher::create(*trace, rule, "", 0);
    if (!matcher.ok()) return matcher.status();
    (*matcher)->add_all(*trace);
    set->add_run((*matcher)->latencies());
  }
  return Status::Ok();
}

std::vector<DiffEvent> compare_events(const Side& a, const Side& b) {
  std::map<std::string, DiffEvent> by_name;
  auto add = [&](const Side& side, bool is_b) {
    const double runs = static_cast<double>(side.counts.size());
    for (const EventCounts& c : side.counts) {
      for (const auto& [name, n] : c.count) {
        DiffEvent& e = by_name[name];
        e.event = name;
        const double rate = c.span_s() > 0 ? static_cast<double>(n) / c.span_s() : 0;
        (is_b ? e.count_b : e.count_a) += static_cast<double>(n) / runs;
        (is_b ? e.rate_b : e.rate_a) += rate / runs;
      }
    }
  };
  add(a, false);
  add(b, true);
  std::vector<DiffEvent> out;
  for (auto& [name, e] : by_name) out.push_back(std::move(e));
  return out;
}

// The I/O stages of breakdown, when every run of both sides holds them.
void stage_samples(Side& a, Side& b, std::vector<SubjectSamples>* subjects,
                   std::vector<std::string>* notes) {
  size_t with_kernel = 0, runs = a.traces.size() + b.traces.size();
  for (const Side* side : {&a, &b}) {
    for (const auto& t : side->traces) with_kernel += t->kernel_events().empty() ? 0 : 1;
  }
  if (with_kernel == 0) return;
  if (with_kernel < runs) {
    notes->push_back("I/O stages not compared: not every run holds kernel events");
    return;
  }
  std::vector<SubjectSamples> stages;
  std::vector<std::array<bool, 2>> missing;  // by stage: whether a run of A, of B holds none
  for (Side* side : {&a, &b}) {
    for (auto& trace : side->traces) {
      std::vector<std::vector<uint64_t>> latencies;
      auto breakdown = analyze_breakdown(*trace, &latencies);
      if (!breakdown.ok()) {
        notes->push_back(fmt::format("I/O stages not compared: {}", breakdown.status().message()));
        return;
      }
      // The stages, not their total (the pair iograph:node_submit -> node_complete is it).
      const size_t n = breakdown->stages.size() - 1;
      if (stages.empty()) {
        stages.resize(n);
        missing.assign(n, {false, false});
        for (size_t s = 0; s < n; ++s) {
          stages[s].kind = "stage";
          stages[s].name = breakdown->stages[s].name;
        }
      }
      for (size_t s = 0; s < n; ++s) {
        (side == &a ? stages[s].a : stages[s].b).add_run(latencies[s]);
        if (latencies[s].empty()) missing[s][side == &a ? 0 : 1] = true;
      }
    }
  }
  // A run that joined no I/O through a stage (its program did no I/O while the kernel was
  // traced, or none of its I/O joined) is no measurement of it: compared, that stage would
  // read as "nothing changed".
  for (size_t s = 0; s < stages.size(); ++s) {
    const auto [in_a, in_b] = missing[s];
    if (in_a || in_b) {
      notes->push_back(fmt::format("I/O stage {} not compared: a run of {} holds no I/O through it",
                                   stages[s].name,
                                   in_a && in_b ? "each side"
                                   : in_a       ? "A"
                                                : "B"));
      continue;
    }
    subjects->push_back(std::move(stages[s]));
  }
}

Result<DiffReport> diff_traces(const std::vector<std::string>& a_paths,
                               const std::vector<std::string>& b_paths,
                               const DiffOptions& options) {
  auto a = open_side(a_paths);
  if (!a.ok()) return a.status();
  auto b = open_side(b_paths);
  if (!b.ok()) return b.status();
  DiffReport report;
  report.mode = "traces";
  report.events = compare_events(*a, *b);
  std::vector<SubjectSamples> subjects;
  const bool given = !options.pairs.empty();
  for (const PairRule& rule : given ? options.pairs : candidate_rules(*a, *b)) {
    if (given) {
      // A rule asked for: an unknown event or field is an error that says what exists.
      for (const Side* side : {&*a, &*b}) {
        for (const auto& t : side->traces) {
          if (auto resolved = resolve_pair_with_kernel(*t, rule); !resolved.ok()) {
            return Status(resolved.status().code(),
                          fmt::format("--pair {}: {}", rule.label(), resolved.status().message()));
          }
        }
      }
    }
    const bool in_a = occurs(*a, rule), in_b = occurs(*b, rule);
    if (!in_a || !in_b) {
      if (given) {
        return Status::NotFound(
            fmt::format("pair {}: no matching begin and end records in every "
                        "run of {}",
                        rule.label(), !in_a ? "A" : "B"));
      }
      if (in_a || in_b) {
        report.notes.push_back(
            fmt::format("pair {} only in {}: not compared", rule.label(), in_a ? "A" : "B"));
      }
      continue;
    }
    SubjectSamples s;
    s.kind = "pair";
    s.name = rule.label();
    if (Status st = pair_samples(*a, rule, &s.a); !st.ok()) return st;
    if (Status st = pair_samples(*b, rule, &s.b); !st.ok()) return st;
    subjects.push_back(std::move(s));
  }
  stage_samples(*a, *b, &subjects, &report.notes);
  std::vector<Trace*> ta, tb;
  for (auto& t : a->traces) ta.push_back(t.get());
  for (auto& t : b->traces) tb.push_back(t.get());
  diff::thread_samples(ta, tb, &subjects, &report.notes);
  if (subjects.empty() && report.events.empty()) {
    return Status::NotFound("nothing to compare: no records in either side's traces");
  }
  report.options = options;
  diff::compare_subjects(subjects, &report);
  return report;
}

}  // namespace

Result<DiffReport> diff_runs(const std::vector<std::string>& a, const std::vector<std::string>& b,
                             const DiffOptions& options) {
  if (a.empty() || b.empty()) {
    return Status::Invalid("diff needs at least one run on each side (A and B)");
  }
  size_t json = 0;
  for (const auto* side : {&a, &b}) {
    for (const std::string& p : *side) json += looks_like_json(p) ? 1 : 0;
  }
  DiffReport report;
  if (json == 0) {
    auto r = diff_traces(a, b, options);
    if (!r.ok()) return r.status();
    report = std::move(*r);
  } else if (json == a.size() + b.size()) {
    std::vector<SubjectSamples> subjects;
    report.mode = "benchmarks";
    report.options = options;
    if (Status s = diff::load_benchmarks(a, b, &subjects, &report.notes); !s.ok()) return s;
    if (subjects.empty()) {
      return Status::NotFound("no benchmark is in the results of both sides");
    }
    diff::compare_subjects(subjects, &report);
  } else {
    return Status::Invalid(
        "diff compares trace files with trace files, or benchmark results (JSON) with "
        "benchmark results: not a mix");
  }
  report.a = a;
  report.b = b;
  // Every subject holds every run (a pair, stage, thread or benchmark missing from one is
  // not compared): the runs decide for all.
  report.attributable = a.size() + b.size() >= 3;
  report.degrees_of_freedom = static_cast<double>(a.size() + b.size()) - 2;
  return report;
}

namespace diff {
namespace {

DiffEstimate estimate(const diffstats::Verdict& v) { return {v.lo, v.hi, v.rel_lo, v.rel_hi, v.p}; }

DiffMetric to_metric(const diffstats::MetricResult& r) {
  DiffMetric m;
  m.name = diffstats::metric_name(r.metric);
  m.a = r.a;
  m.b = r.b;
  m.delta = r.delta;
  m.relative = r.relative;
  m.tested = r.tested;
  m.why = r.why;
  if (r.attributable) m.between = estimate(r.between);
  m.significant = r.between.passed;
  m.within = estimate(r.within);
  m.observed = r.within.passed;
  return m;
}

DiffSubject to_subject(const SubjectSamples& s,
                       const std::array<diffstats::MetricResult, diffstats::kMetrics>& results) {
  DiffSubject d;
  d.kind = s.kind;
  d.name = s.name;
  d.unit = s.unit;
  d.count_a = s.a.count();
  d.count_b = s.b.count();
  d.runs_a = s.a.runs();
  d.runs_b = s.b.runs();
  d.a = s.a.stats();
  d.b = s.b.stats();
  for (const diffstats::MetricResult& r : results) {
    d.metrics.push_back(to_metric(r));
    const DiffMetric& m = d.metrics.back();
    d.significant = d.significant || m.significant;
    d.observed = d.observed || m.observed;
    if (r.metric == diffstats::kP99 || r.metric == diffstats::kP999) {
      d.tail_significant = d.tail_significant || m.significant;
    }
  }
  const double per_run_b = d.runs_b > 0 ? static_cast<double>(d.count_b) / d.runs_b : 0;
  // count x delta of the mean: the time B's samples took beyond A's mean. A thread's
  // on-CPU slices and off-CPU gaps change in number as well as length (switched out more
  // often, for shorter): its time added is B's total per run less A's.
  const double per_run_a = d.runs_a > 0 ? static_cast<double>(d.count_a) / d.runs_a : 0;
  const diffstats::MetricResult& mean = results[diffstats::kMean];
  d.added = s.kind == "thread" ? per_run_b * mean.b - per_run_a * mean.a : per_run_b * mean.delta;
  d.tail_added = per_run_b * 0.01 * results[diffstats::kP99].delta;
  return d;
}

void rank(DiffReport* report) {
  const auto& all = report->subjects;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].significant) report->ranked.push_back(i);
    if (all[i].tail_significant) report->tail_ranked.push_back(i);
    if (all[i].observed && !all[i].significant) report->observed_ranked.push_back(i);
  }
  auto by_added = [&](size_t x, size_t y) { return all[x].added > all[y].added; };
  std::stable_sort(report->ranked.begin(), report->ranked.end(), by_added);
  std::stable_sort(report->observed_ranked.begin(), report->observed_ranked.end(), by_added);
  std::stable_sort(report->tail_ranked.begin(), report->tail_ranked.end(),
                   [&](size_t x, size_t y) { return all[x].tail_added > all[y].tail_added; });
}

}  // namespace

void compare_subjects(std::vector<SubjectSamples>& subjects, DiffReport* report) {
  const DiffOptions& o = report->options;
  diffstats::Options so;
  so.seed = o.seed;
  so.level = o.level;
  so.min_change = o.min_change_percent / 100;
  // Enough replicates that the smallest percentile p-value (1 / (R + 1)) passes Holm's
  // first threshold (alpha / tests) with room to spare.
  const double tests = 4.0 * static_cast<double>(subjects.size());
  so.resamples =
      std::max<uint32_t>(o.resamples, static_cast<uint32_t>(std::ceil(8 * tests / o.alpha)));
  report->options.resamples = so.resamples;
  std::vector<std::array<diffstats::MetricResult, diffstats::kMetrics>> results;
  std::vector<diffstats::MetricResult*> family;
  for (const SubjectSamples& s : subjects) results.push_back(diffstats::compare(s.a, s.b, so));
  for (size_t i = 0; i < results.size(); ++i) {
    // A benchmark's samples (repetitions, per-file medians) have no heavy tail, and are often
    // too few for a median: its mean decides too.
    results[i][diffstats::kMean].decides = subjects[i].kind == "benchmark";
    for (auto& m : results[i]) family.push_back(&m);
  }
  report->tests = diffstats::apply_holm(family, o.alpha);
  for (size_t i = 0; i < subjects.size(); ++i) {
    report->subjects.push_back(to_subject(subjects[i], results[i]));
  }
  rank(report);
}

}  // namespace diff
}  // namespace nanotrace
