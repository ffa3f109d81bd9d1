// Unit tests of the duration trigger grammar: BEGIN..END by KEY [open] > THRESHOLD [options],
// its one-line errors, and binding a key to an event's fields.
#include <gtest/gtest.h>

#include <string>

#include "nanotrace/trigger.hpp"

namespace nanotrace {
namespace {

DurationRule rule(const std::string& text) {
  auto t = Trigger::parse(text);
  EXPECT_TRUE(t.ok()) << text << ": " << t.status().message();
  if (!t.ok() || !t->duration) return {};
  return *t->duration;
}

std::string error(const std::string& text) {
  auto t = Trigger::parse(text);
  EXPECT_FALSE(t.ok()) << text << " parsed";
  if (t.ok()) return "";
  EXPECT_EQ(t.status().message().find('\n'), std::string::npos);  // one line
  return t.status().message();
}

TEST(DurationGrammarTest, SlowPairWithAFixedThreshold) {
  auto t = Trigger::parse("io:submit..io:complete by req > 5ms");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE(t->duration.has_value());
  const DurationRule& d = *t->duration;
  EXPECT_EQ(d.begin_name(), "io:submit");
  EXPECT_EQ(d.end_name(), "io:complete");
  EXPECT_EQ(d.key_text(), "req");
  EXPECT_FALSE(d.open);
  EXPECT_FALSE(d.adaptive());
  EXPECT_EQ(d.threshold_ns, 5'000'000u);
  EXPECT_EQ(d.threshold_text(), "5ms");
  // The match of a slow trigger is the end record.
  EXPECT_EQ(t->group, "io");
  EXPECT_EQ(t->event, "complete");
  EXPECT_TRUE(t->conditions.empty());
}

TEST(DurationGrammarTest, StuckOperationMatchesTheBeginEvent) {
  auto t = Trigger::parse("io:submit..io:complete by req open > 50ms");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(t->duration->open);
  EXPECT_EQ(t->duration->threshold_ns, 50'000'000u);
  EXPECT_EQ(t->event, "submit");
}

TEST(DurationGrammarTest, ThresholdsAndSpacing) {
  EXPECT_EQ(rule("a:b..a:c by k > 250us").threshold_ns, 250'000u);
  EXPECT_EQ(rule("a:b..a:c by k > 2.5ms").threshold_ns, 2'500'000u);
  EXPECT_EQ(rule("a:b..a:c by k > 1s").threshold_ns, 1'000'000'000u);
  EXPECT_EQ(rule("a:b..a:c by k > 0.5s").threshold_ns, 500'000'000u);
  EXPECT_EQ(rule("a:b..a:c by k > 800ns").threshold_ns, 800u);
  EXPECT_EQ(rule("a:b..a:c by k>5ms").threshold_ns, 5'000'000u);
  EXPECT_EQ(rule("a:b..a:c by k > 5 ms").threshold_ns, 5'000'000u);
  EXPECT_EQ(rule("  a:b..a:c\tby  k  open>7ms ").threshold_ns, 7'000'000u);
}

TEST(DurationGrammarTest, KeysOfSeveralFields) {
  DurationRule d = rule("iograph:node_submit..iograph:node_complete by graph+node > 1ms");
  ASSERT_EQ(d.key.size(), 2u);
  EXPECT_EQ(d.key[0], "graph");
  EXPECT_EQ(d.key[1], "node");
  EXPECT_EQ(d.key_text(), "graph+node");
}

TEST(DurationGrammarTest, RelativeThresholds) {
  for (const char* text : {"a:b..a:c by k > 10 x p99", "a:b..a:c by k > 10x p99",
                           "a:b..a:c by k > 10xp99", "a:b..a:c by k > 10 \u00d7 p99"}) {
    DurationRule d = rule(text);
    EXPECT_TRUE(d.adaptive()) << text;
    EXPECT_DOUBLE_EQ(d.factor, 10) << text;
    EXPECT_DOUBLE_EQ(d.percentile, 99) << text;
    EXPECT_EQ(d.threshold_text(), "10 x p99");
  }
  DurationRule d = rule("a:b..a:c by k open > 2.5 x p99.9 over 30s warmup 200");
  EXPECT_TRUE(d.open);
  EXPECT_DOUBLE_EQ(d.factor, 2.5);
  EXPECT_DOUBLE_EQ(d.percentile, 99.9);
  EXPECT_EQ(d.window_ns, 30'000'000'000u);
  EXPECT_EQ(d.warmup, 200u);
  // Defaults: ten seconds, a thousand pairs.
  EXPECT_EQ(rule("a:b..a:c by k > 3 x p50").window_ns, 10'000'000'000u);
  EXPECT_EQ(rule("a:b..a:c by k > 3 x p50").warmup, 1000u);
}

TEST(DurationGrammarTest, FireLimits) {
  DurationRule d = rule("a:b..a:c by k > 5ms cap 3 per 10s cooldown 500ms");
  EXPECT_EQ(d.limits.cap, 3u);
  EXPECT_EQ(d.limits.per_ns, 10'000'000'000u);
  EXPECT_EQ(d.limits.cooldown_ns, 500'000'000u);
  EXPECT_TRUE(d.limits.limited());
  DurationRule e = rule("a:b..a:c by k open > 5ms cap 2/1s");
  EXPECT_EQ(e.limits.cap, 2u);
  EXPECT_EQ(e.limits.per_ns, 1'000'000'000u);
  EXPECT_FALSE(rule("a:b..a:c by k > 5ms").limits.limited());
}

TEST(DurationGrammarTest, MalformedExpressionsGetAOneLineReason) {
  EXPECT_NE(error("io:submit..complete by req > 5ms").find("group:event"), std::string::npos);
  EXPECT_NE(error("io:submit..io:submit by req > 5ms").find("same event"), std::string::npos);
  EXPECT_NE(error("io:submit..io:complete req > 5ms").find("by KEY"), std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by").find("key"), std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by re-q > 5ms").find("bad key"), std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req 5ms").find("'> THRESHOLD'"), std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req >= 5ms").find("'> THRESHOLD'"), std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req >").find("missing the threshold"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 5").find("bad threshold '5'"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 5 parsecs").find("bad threshold"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 10 x p100").find("bad threshold"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 0 x p99").find("bad threshold"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 99999999999999s").find("bad threshold"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 5ms cap 3").find("cap N per DURATION"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 5ms cap 0 per 1s").find("cap N per"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 5ms cooldown").find("cooldown DURATION"),
            std::string::npos);
  EXPECT_NE(
      error("io:submit..io:complete by req > 5ms cap 1 per 1s cap 2 per 1s").find("given twice"),
      std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 5ms over 10s").find("relative threshold"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 5ms && len > 4").find("unexpected '&&'"),
            std::string::npos);
  EXPECT_NE(error("io:submit..io:complete by req > 1 x p99 over 1ms").find("at least 10ms"),
            std::string::npos);
}

TEST(DurationGrammarTest, RecordTriggersAreUnchanged) {
  auto t = Trigger::parse("io:complete lat_us>1000");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->duration.has_value());
  EXPECT_EQ(t->event, "complete");
  ASSERT_EQ(t->conditions.size(), 1u);
}

TEST(DurationGrammarTest, KeyBindsToEachEventsFields) {
  DurationRule d = rule("io:submit..io:complete by dev+req > 5ms");
  auto bound = d.bind_key("io:submit", {"req", "len", "dev:0=sda,1=sdb"});
  ASSERT_TRUE(bound.ok()) << bound.status().message();
  EXPECT_EQ(*bound, (std::vector<uint32_t>{2, 0}));
  auto missing = d.bind_key("io:complete", {"req", "result"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "event io:complete has no field 'dev' (the key)");
}

TEST(DurationGrammarTest, DurationsParse) {
  uint64_t ns = 0;
  EXPECT_TRUE(Trigger::parse_duration("1.25us", &ns));
  EXPECT_EQ(ns, 1250u);
  EXPECT_FALSE(Trigger::parse_duration("", &ns));
  EXPECT_FALSE(Trigger::parse_duration("ms", &ns));
  EXPECT_FALSE(Trigger::parse_duration("1.2.3ms", &ns));
  EXPECT_FALSE(Trigger::parse_duration("-1ms", &ns));
  EXPECT_TRUE(Trigger::parse_duration("10m", &ns));
  EXPECT_EQ(ns, 600'000'000'000u);
  EXPECT_TRUE(Trigger::parse_duration("1.5h", &ns));
  EXPECT_EQ(ns, 5'400'000'000'000u);
  EXPECT_FALSE(Trigger::parse_duration("10d", &ns));
  EXPECT_FALSE(Trigger::parse_duration("1e3ms", &ns));
}

}  // namespace
}  // namespace nanotrace
