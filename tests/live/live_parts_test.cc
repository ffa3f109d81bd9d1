// The live view's parts on their own: the latency histogram against exact percentiles, the
// table of operations in flight (order, replacement, an end read before its begin, the bound
// on memory), and the frame's JSON both ways, hostile text included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "live/latency_histogram.hpp"
#include "live/live_view.hpp"
#include "live/open_operations.hpp"

namespace nanotrace::live {
namespace {

uint64_t exact_rank(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

TEST(LatencyHistogramTest, QuantilesWithinOneSixtyFourthOfExact) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(11, 2);  // ~60 us median, long tail
  LatencyHistogram h;
  std::vector<uint64_t> all;
  for (int i = 0; i < 20000; ++i) {
    auto v = static_cast<uint64_t>(dist(rng));
    h.add(v);
    all.push_back(v);
  }
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double exact = static_cast<double>(exact_rank(all, q));
    EXPECT_NEAR(static_cast<double>(h.quantile(q)), exact, exact / 64 + 1) << q;
  }
  EXPECT_EQ(h.max(), *std::max_element(all.begin(), all.end()));
  EXPECT_EQ(h.count(), all.size());
  LatencyHistogram other;
  other.add(~uint64_t{0});  // the last bucket
  h.merge(other);
  EXPECT_EQ(h.max(), ~uint64_t{0});
  EXPECT_EQ(h.quantile(1.0), ~uint64_t{0});
  h.clear();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.quantile(0.5), 0u);
}

TEST(LatencyHistogramTest, BucketsCoverEveryValueInOrder) {
  uint64_t prev = 0;
  for (uint32_t b = 1; b < LatencyHistogram::kBuckets; ++b) {
    const uint64_t low = LatencyHistogram::bucket_low(b);
    ASSERT_GT(low, prev) << b;
    ASSERT_EQ(LatencyHistogram::bucket_of(low), b);
    ASSERT_EQ(LatencyHistogram::bucket_of(low - 1), b - 1);
    prev = low;
  }
}

OpKey bits(uint64_t k) { return OpKey{false, k, {}}; }
OpKey text(std::string_view t) { return OpKey{true, 0, t}; }

TEST(OpenOperationsTest, OldestFirstAndClosedOnesLeave) {
  OpenOperations ops(100);
  OpenOperation* slot = nullptr;
  for (uint64_t k = 1; k <= 10; ++k) {
    ASSERT_FALSE(ops.begin(bits(k), 100 * k, &slot).has_value());
    slot->tid = static_cast<uint32_t>(k);
  }
  ASSERT_FALSE(ops.begin(text("sda"), 1100, &slot).has_value());
  EXPECT_EQ(ops.end(bits(1), 150), std::optional<uint64_t>(100));
  EXPECT_EQ(ops.end(bits(3), 350), std::optional<uint64_t>(300));
  EXPECT_EQ(ops.end(text("sda"), 1200), std::optional<uint64_t>(1100));
  EXPECT_EQ(ops.size(), 8u);
  auto oldest = ops.oldest(3);
  ASSERT_EQ(oldest.size(), 3u);
  EXPECT_EQ(oldest[0]->begin_ticks, 200u);
  EXPECT_EQ(oldest[1]->begin_ticks, 400u);
  EXPECT_EQ(oldest[2]->begin_ticks, 500u);
  // A begin of a key already open replaces it (the earlier one never ended).
  ASSERT_FALSE(ops.begin(bits(2), 2000, &slot).has_value());
  EXPECT_EQ(ops.replaced(), 1u);
  EXPECT_EQ(ops.oldest(1)[0]->begin_ticks, 400u);
}

TEST(OpenOperationsTest, AnEndReadBeforeItsBeginPairsOnTheNextPass) {
  OpenOperations ops(100);
  EXPECT_FALSE(ops.end(bits(7), 900).has_value());  // its begin's thread was read first
  EXPECT_FALSE(ops.end(text("k"), 950).has_value());
  ops.end_pass();
  OpenOperation* slot = nullptr;
  EXPECT_EQ(ops.begin(bits(7), 800, &slot), std::optional<uint64_t>(900));
  EXPECT_EQ(ops.begin(text("k"), 850, &slot), std::optional<uint64_t>(950));
  EXPECT_EQ(ops.size(), 0u);
  // An end not followed by its begin within a pass is unmatched for good; a later begin of
  // the key opens a new operation.
  EXPECT_FALSE(ops.end(bits(8), 1000).has_value());
  ops.end_pass();
  ops.end_pass();
  EXPECT_EQ(ops.unmatched_ends(), 1u);
  EXPECT_FALSE(ops.begin(bits(8), 900, &slot).has_value());
  EXPECT_EQ(ops.size(), 1u);
  // A begin after the kept end is another operation.
  EXPECT_FALSE(ops.end(bits(9), 1000).has_value());
  EXPECT_FALSE(ops.begin(bits(9), 1100, &slot).has_value());
  EXPECT_EQ(ops.size(), 2u);
}

TEST(OpenOperationsTest, KeysThatNeverCloseStayBounded) {
  OpenOperations ops(1000);
  OpenOperation* slot = nullptr;
  for (uint64_t k = 0; k < 200000; ++k) {
    ASSERT_FALSE(ops.begin(bits(k), k, &slot).has_value());
    if (k % 2 == 1) ops.end(bits(k), k + 1);  // half close: stale entries in the age order
  }
  EXPECT_LE(ops.size(), 1000u);
  EXPECT_GT(ops.dropped(), 0u);
  EXPECT_EQ(ops.dropped() + ops.size(), 100000u);  // every begin that did not end: kept or counted
  auto oldest = ops.oldest(2);
  ASSERT_EQ(oldest.size(), 2u);
  EXPECT_LT(oldest[0]->begin_ticks, oldest[1]->begin_ticks);
  EXPECT_GE(oldest[0]->begin_ticks, 200000u - 2000);  // the newest were kept
}

LiveFrame sample_frame() {
  LiveFrame f;
  f.sequence = 3;
  f.realtime_ns = 1700000000000000000ull;
  f.interval_s = 1.002;
  LiveProcess p;
  p.pid = 42;
  p.name = "app\xff";  // not UTF-8: made valid
  p.missed = 5;
  f.processes.push_back(p);
  f.events.push_back({"io:submit", 10, 9.98, 100, 1});
  LivePair pair;
  pair.rule = {"io:submit", "io:complete", "req"};
  pair.inferred = true;
  pair.last = {10, 100, 900, 1000};
  pair.open = 1;
  pair.oldest_open_ns = 5000000000;
  f.pairs.push_back(pair);
  LiveWaiter w;
  w.pid = 42;
  w.rule = pair.rule;
  w.key = "424242";
  w.age_ns = 5000000000;
  w.fields = "req=424242 len=4096";
  w.end_may_be_lost = true;
  f.waiters.push_back(w);
  f.open_total = 1;
  f.notes.push_back("a note");
  return f;
}

TEST(FrameJsonTest, RoundTrips) {
  const LiveFrame f = sample_frame();
  auto back = parse_frame_json(frame_json(f));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->sequence, 3u);
  ASSERT_EQ(back->processes.size(), 1u);
  EXPECT_EQ(back->processes[0].name, "app\xef\xbf\xbd");
  EXPECT_EQ(back->processes[0].missed, 5u);
  ASSERT_EQ(back->pairs.size(), 1u);
  EXPECT_EQ(back->pairs[0].rule.key, "req");
  EXPECT_EQ(back->pairs[0].last.p99_ns, 900u);
  ASSERT_EQ(back->waiters.size(), 1u);
  EXPECT_EQ(back->waiters[0].age_ns, 5000000000u);
  EXPECT_TRUE(back->waiters[0].end_may_be_lost);
  EXPECT_EQ(back->notes, std::vector<std::string>{"a note"});
}

TEST(FrameJsonTest, HostileTextIsAnErrorNotAThrow) {
  std::string good = frame_json(sample_frame());
  for (const char* bad :
       {"", "{", "[]", "null", "{\"version\":1}", "{\"version\":2,\"sequence\":0}",
        "{\"version\":-1}", "{\"version\":1e400}"}) {
    EXPECT_FALSE(parse_frame_json(bad).ok()) << bad;
  }
  // Each member in turn of the wrong type.
  for (const char* member : {"\"sequence\": 3", "\"age_ns\": 5000000000", "\"pid\": 42",
                             "\"end_may_be_lost\": true", "\"p99_ns\": 900"}) {
    std::string text = good;
    size_t at = text.find(member);
    ASSERT_NE(at, std::string::npos) << member;
    const std::string name(member, std::strchr(member, ':'));
    text.replace(at, std::strlen(member), name + ": \"x\"");
    EXPECT_FALSE(parse_frame_json(text).ok()) << text;
  }
  // Every prefix of a good frame: never a crash, an error for each.
  for (size_t n = 0; n + 1 < good.size(); n += 7) {
    EXPECT_FALSE(parse_frame_json(good.substr(0, n)).ok());
  }
}

TEST(FrameMetricsTest, OneSamplePerRuleWithHelpAndType) {
  LiveFrame f = sample_frame();
  LivePair idle;
  idle.rule = {"dev:lock_begin", "dev:lock_end", "na\"me"};  // a label value to escape
  f.pairs.push_back(idle);
  const std::string text = frame_metric_families(f, "node=\"n1\"");
  EXPECT_NE(text.find("# TYPE nanotrace_pair_oldest_open_seconds gauge\n# HELP "),
            std::string::npos);
  EXPECT_NE(text.find("nanotrace_pair_oldest_open_seconds{node=\"n1\",begin=\"io:submit\","
                      "end=\"io:complete\",key=\"req\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("nanotrace_pair_recent_p99_seconds{node=\"n1\",begin=\"io:submit\","
                      "end=\"io:complete\",key=\"req\"} 9e-07\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("nanotrace_pair_recent_p99_seconds{node=\"n1\",begin=\"dev:lock_begin\","
                      "end=\"dev:lock_end\",key=\"na\\\"me\"} NaN\n"),
            std::string::npos)
      << text;
  // promtool, where installed, checks the exposition as Prometheus reads it.
  if (system("command -v promtool >/dev/null 2>&1") == 0) {
    FILE* p = popen("promtool check metrics >/dev/null 2>&1", "w");
    ASSERT_NE(p, nullptr);
    fwrite(text.data(), 1, text.size(), p);
    EXPECT_EQ(pclose(p), 0) << text;
  }
}

}  // namespace
}  // namespace nanotrace::live
