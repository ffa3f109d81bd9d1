// The comparison behind the latency tests: analyze_latency's path (PairMatcher::add_all, the
// matcher fed from the columnar reader) against the record-by-record path (PairMatcher::add
// on Trace::read_all, as `latency` did before) on pairs_program's rules. Every figure of the
// two reports must be equal, and so must the latencies in arrival order.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/child_process.hpp"
#include "nanotrace/analysis.hpp"

namespace nanotrace::latency_test {

inline const std::string kBin = NANOTRACE_BIN_DIR;

// Runs pairs_program to completion with env, keeping its segment; returns the path.
inline std::string run_program(const std::string& env, const std::string& rounds) {
  std::string out;
  std::string path =
      testing::run_keeping_segment(env + " " + kBin + "/pairs_program --rounds " + rounds, &out);
  EXPECT_FALSE(path.empty()) << out;
  return path;
}

struct Reports {
  LatencyReport fast, slow;
  std::vector<uint64_t> fast_latencies, slow_latencies;
};

// The report of both paths for one rule (PairMatcher::add_all and PairMatcher::add).
inline Reports both_paths(Trace& trace, const PairRule& rule, const std::string& by) {
  Reports out;
  auto fast = PairMatcher::create(trace, rule, by, 7);
  auto slow = PairMatcher::create(trace, rule, by, 7);
  EXPECT_TRUE(fast.ok() && slow.ok()) << rule.label();
  if (!fast.ok() || !slow.ok()) return out;
  uint64_t fast_lost = 0, slow_lost = 0;
  for (const ThreadStats& t : (*fast)->add_all(trace)) fast_lost += t.lost();
  auto source = trace.read_all();
  const std::vector<ThreadStats>& threads = source->threads();
  Record r;
  while (source->next(&r)) (*slow)->add(r, threads);
  for (const ThreadStats& t : source->threads()) slow_lost += t.lost();
  EXPECT_EQ(fast_lost, slow_lost);
  out.fast_latencies.assign((*fast)->latencies().begin(), (*fast)->latencies().end());
  out.slow_latencies.assign((*slow)->latencies().begin(), (*slow)->latencies().end());
  out.fast = (*fast)->finish(fast_lost);
  out.slow = (*slow)->finish(slow_lost);
  return out;
}

inline void expect_same_stats(const LatencyStats& a, const LatencyStats& b,
                              const std::string& what) {
  EXPECT_EQ(a.by_value, b.by_value) << what;
  EXPECT_EQ(a.count, b.count) << what;
  EXPECT_EQ(a.unmatched_begins, b.unmatched_begins) << what;
  EXPECT_EQ(a.min_ns, b.min_ns) << what;
  EXPECT_EQ(a.p50_ns, b.p50_ns) << what;
  EXPECT_EQ(a.p90_ns, b.p90_ns) << what;
  EXPECT_EQ(a.p99_ns, b.p99_ns) << what;
  EXPECT_EQ(a.p999_ns, b.p999_ns) << what;
  EXPECT_EQ(a.max_ns, b.max_ns) << what;
  EXPECT_EQ(a.mean_ns, b.mean_ns) << what;
  ASSERT_EQ(a.histogram.size(), b.histogram.size()) << what;
  for (size_t i = 0; i < a.histogram.size(); ++i) {
    EXPECT_EQ(a.histogram[i].lo_ns, b.histogram[i].lo_ns) << what;
    EXPECT_EQ(a.histogram[i].count, b.histogram[i].count) << what;
  }
}

// Compares both paths on every rule of pairs_program; returns the fast path's reports.
inline std::vector<LatencyReport> expect_same(Trace& trace) {
  struct Case {
    PairRule rule;
    std::string by;
  } cases[] = {
      {{"pair:begin", "pair:end", "id"}, ""},   {{"pair:begin", "pair:end", "id"}, "dev"},
      {{"pair:begin", "pair:end", "name"}, ""}, {{"pair:begin", "pair:end", "name"}, "id"},
      {{"mix:begin", "mix:end", "k"}, "k"},
  };
  std::vector<LatencyReport> out;
  for (const Case& c : cases) {
    const std::string what = c.rule.label() + " by '" + c.by + "'";
    Reports r = both_paths(trace, c.rule, c.by);
    const LatencyReport &a = r.fast, &b = r.slow;
    EXPECT_EQ(r.fast_latencies, r.slow_latencies) << what;
    EXPECT_EQ(a.records, b.records) << what;
    EXPECT_EQ(a.begins, b.begins) << what;
    EXPECT_EQ(a.ends, b.ends) << what;
    EXPECT_EQ(a.unmatched_ends, b.unmatched_ends) << what;
    EXPECT_EQ(a.lost_adjacent_pairs, b.lost_adjacent_pairs) << what;
    EXPECT_EQ(a.lost_adjacent_unmatched, b.lost_adjacent_unmatched) << what;
    expect_same_stats(a.overall, b.overall, what);
    EXPECT_EQ(a.groups.size(), b.groups.size()) << what;
    for (size_t i = 0; i < a.groups.size() && i < b.groups.size(); ++i) {
      expect_same_stats(a.groups[i], b.groups[i], what + " group " + b.groups[i].by_value);
    }
    EXPECT_EQ(a.top.size(), b.top.size()) << what;
    for (size_t i = 0; i < a.top.size() && i < b.top.size(); ++i) {
      EXPECT_EQ(a.top[i].latency_ns, b.top[i].latency_ns) << what;
      EXPECT_EQ(a.top[i].begin_ns, b.top[i].begin_ns) << what;
      EXPECT_EQ(a.top[i].tid, b.top[i].tid) << what;
      EXPECT_EQ(a.top[i].pid, b.top[i].pid) << what;
      EXPECT_EQ(a.top[i].thread, b.top[i].thread) << what;
      EXPECT_EQ(a.top[i].key, b.top[i].key) << what;
      EXPECT_EQ(a.top[i].by_value, b.top[i].by_value) << what;
    }
    out.push_back(std::move(r.fast));
  }
  return out;
}

}  // namespace nanotrace::latency_test
