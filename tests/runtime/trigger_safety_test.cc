// Triggers freeze exactly under any scheduling: with 32 threads on one CPU and the firing
// thread at SCHED_IDLE (so it loses the CPU between the match and the freeze), records
// published after the match stay within the window plus one per thread, for small and large
// rings. Trigger constants are exact 64-bit integers; out-of-range ones are refused.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>

#include "common/child_process.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

// Runs the trigger-lag program (tests/runtime/helpers/trigger_lag.cc) and checks every run.
void descheduled_runs(const std::string& ring, int runs) {
  const uint64_t kThreads = 32, kWindow = 1000;
  testing::ChildProcess child(
      {std::string(NANOTRACE_BIN_DIR) + "/nanotrace_trigger_lag", "--runs", std::to_string(runs),
       "--threads", std::to_string(kThreads), "--window", std::to_string(kWindow)},
      {"NANOTRACE_BUFFER=" + ring, "NANOTRACE_THREADS=64"});
  int seen = 0, over = 0;
  std::string line, summary;
  while (!(line = child.read_line()).empty()) {
    unsigned long long run = 0, bound = 0, match = 0;
    long long after = 0;
    if (std::sscanf(line.c_str(), "run %llu after %lld bound %llu match %llu", &run, &after, &bound,
                    &match) != 4) {
      summary = line;
      continue;
    }
    ++seen;
    EXPECT_EQ(bound, kWindow + kThreads);
    // The trigger names this run's matching record (0: its thread, descheduled after another
    // completed its firing, has not published it yet). A thread descheduled past its round
    // once completed a firing of no match, naming an earlier run's record.
    EXPECT_TRUE(match == 0 || match == run)
        << "run " << run << ": the trigger names run " << match << "'s record";
    // Far fewer than the window would mean the freeze came early or records were lost (a
    // thread may stamp a record just before the match and publish it, counted, just after).
    EXPECT_GE(after, static_cast<long long>(kWindow - kThreads)) << "run " << run;
    if (after > static_cast<long long>(bound)) {
      ++over;
      ADD_FAILURE() << "run " << run << ": " << after << " records after the match, bound "
                    << bound;
    }
  }
  int status = child.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(seen, runs) << summary;
  EXPECT_EQ(over, 0) << summary;
}

TEST(TriggerSafetyTest, DescheduledFiringThreadSmallRings) { descheduled_runs("64K", 10); }

TEST(TriggerSafetyTest, DescheduledFiringThreadLargeRings) { descheduled_runs("1M", 5); }

void emit_big(uint64_t u, int64_t s) { NANOTRACE(test, big, "u={} s={}", u, s); }

// Lets the next case start from running rings whatever the previous one did.
void unfreeze() {
  if (frozen()) {
    EXPECT_TRUE(resume().ok());
  }
}

TEST(TriggerSafetyTest, ConstantsAreExact64BitIntegers) {
  emit_big(0, 0);  // this process's segment and ring exist from here on

  // Unsigned: 2^64 - 2 and its neighbours, all the same number as a double.
  ASSERT_TRUE(arm_trigger("test:big u==18446744073709551614").ok());
  for (uint64_t u :
       {18446744073709551614ull - 16, 18446744073709551614ull - 1, 18446744073709551614ull + 1}) {
    emit_big(u, 0);
    EXPECT_FALSE(frozen()) << "froze on u=" << u;
    unfreeze();
  }
  emit_big(18446744073709551614ull, 0);
  EXPECT_TRUE(frozen()) << "did not freeze on the exact value";
  unfreeze();
  ASSERT_TRUE(disarm_trigger().ok());

  // 2^53 + 1: the first integer a double cannot hold.
  ASSERT_TRUE(arm_trigger("test:big u==9007199254740993").ok());
  emit_big(9007199254740992ull, 0);
  EXPECT_FALSE(frozen()) << "froze on 9007199254740992";
  unfreeze();
  emit_big(9007199254740993ull, 0);
  EXPECT_TRUE(frozen());
  unfreeze();
  ASSERT_TRUE(disarm_trigger().ok());

  // Signed, both signs, and the extremes.
  ASSERT_TRUE(arm_trigger("test:big s==-9007199254740993").ok());
  emit_big(0, -9007199254740992ll);
  EXPECT_FALSE(frozen()) << "froze on -9007199254740992";
  unfreeze();
  emit_big(0, -9007199254740993ll);
  EXPECT_TRUE(frozen());
  unfreeze();
  ASSERT_TRUE(disarm_trigger().ok());

  ASSERT_TRUE(arm_trigger("test:big s<=-9223372036854775807").ok());
  emit_big(0, -9223372036854775807ll + 1);
  EXPECT_FALSE(frozen());
  unfreeze();
  emit_big(0, INT64_MIN);
  EXPECT_TRUE(frozen());
  unfreeze();
  ASSERT_TRUE(disarm_trigger().ok());

  ASSERT_TRUE(arm_trigger("test:big u>18446744073709551614").ok());
  emit_big(18446744073709551614ull, 0);
  EXPECT_FALSE(frozen());
  unfreeze();
  emit_big(UINT64_MAX, 0);
  EXPECT_TRUE(frozen());
  unfreeze();
  ASSERT_TRUE(disarm_trigger().ok());
}

TEST(TriggerSafetyTest, OutOfRangeConstantsAreRefused) {
  emit_big(0, 0);
  for (const char* expr :
       {"test:big u==18446744073709551616", "test:big u>99999999999999999999",
        "test:big s==-9223372036854775809", "test:big s<=-99999999999999999999"}) {
    Status st = arm_trigger(expr);
    EXPECT_FALSE(st.ok()) << expr << " was accepted";
    if (!st.ok()) {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << expr << ": " << st.message();
      EXPECT_FALSE(st.message().empty());
    } else {
      (void)disarm_trigger();
    }
  }
  // The largest values themselves are fine.
  EXPECT_TRUE(arm_trigger("test:big u==18446744073709551615").ok());
  EXPECT_TRUE(arm_trigger("test:big s==-9223372036854775808").ok());
  (void)disarm_trigger();
}

}  // namespace
}  // namespace nanotrace
