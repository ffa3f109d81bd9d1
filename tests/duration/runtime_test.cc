// Duration triggers in a traced process (the runtime's pairing): a slow pair fires on its end
// record, a stuck operation fires while it is open and is named by its begin record, fast
// pairs never fire, many threads pair without loss, a flood of begins stays in bounded memory,
// unknown events and keys are refused in one line, the fire cap holds back and counts, and a
// relative threshold follows a drift but catches an outlier. Each case runs
// tests/duration/pairs_producer with the trigger armed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "common/child_process.hpp"
#include "duration/programs.hpp"
#include "nanotrace/controller.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using duration_test::kCli;
using duration_test::kProducer;

// A producer run: started with the trigger in NANOTRACE_TRIGGER, its pid read.
struct ProducerRun {
  ProducerRun(const std::vector<std::string>& args, const std::string& trigger,
              std::vector<std::string> env = {})
      : child(with_program(args), with_trigger(env, trigger)) {
    const std::string first = child.read_line();
    pid = first.rfind("pid ", 0) == 0 ? std::stoi(first.substr(4)) : -1;
  }
  static std::vector<std::string> with_program(std::vector<std::string> args) {
    args.insert(args.begin(), kProducer);
    return args;
  }
  static std::vector<std::string> with_trigger(std::vector<std::string> env,
                                               const std::string& trigger) {
    env.push_back("NANOTRACE_BUFFER=4M");
    if (!trigger.empty()) env.push_back("NANOTRACE_TRIGGER=" + trigger);
    return env;
  }
  // The producer's "ready N" line: N.
  uint64_t ready() {
    const std::string line = child.read_line();
    EXPECT_EQ(line.rfind("ready", 0), 0u) << line;
    return line.size() > 6 ? std::stoull(line.substr(6)) : 0;
  }
  testing::ChildProcess child;
  pid_t pid = -1;
};

TriggerInfo trigger_of(pid_t pid) {
  auto trace = Trace::open_pid(pid);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? (*trace)->process().trigger : TriggerInfo{};
}

// Waits (up to a deadline that fails the test) until `done` holds of the process's trigger.
template <class Done>
TriggerInfo wait_for(pid_t pid, Done done, const char* what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  TriggerInfo t;
  while (std::chrono::steady_clock::now() < deadline) {
    t = trigger_of(pid);
    if (done(t)) return t;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "timed out waiting for " << what;
  return t;
}

double ticks_to_ms(const Trace& trace, uint64_t ticks) {
  const uint64_t tps = trace.process().ticks_per_second;
  return static_cast<double>(ticks) * 1e3 / static_cast<double>(tps == 0 ? 1000000000 : tps);
}

// The record `seq` of the (only) traced thread.
// The record numbered seq. Its strings point into the reader that found it, kept in
// *readers until the test ends (each call adds one).
bool find_record(Trace& trace, uint64_t seq, Record* out,
                 std::vector<std::unique_ptr<RecordSource>>* readers) {
  readers->push_back(trace.read_all());
  while (readers->back()->next(out)) {
    if (out->seq == seq) return true;
  }
  return false;
}

TEST(DurationRuntimeTest, ASlowPairFiresOnItsEndRecord) {
  // 2,000 pairs without a wait inside; pair 1,500 takes 30 ms. On a loaded machine another
  // pair may be descheduled past the threshold first: the trigger then fires on that one,
  // which must be as slow as it says.
  ProducerRun run({"slow", "2000", "0", "30000", "1500"}, "dur:begin..dur:end by req > 10ms");
  run.ready();
  auto trace = Trace::open_pid(run.pid);
  ASSERT_TRUE(trace.ok());
  std::vector<std::unique_ptr<RecordSource>> readers;
  const TriggerInfo t = (*trace)->process().trigger;
  ASSERT_EQ(t.state, abi::TriggerState::kFrozen);
  const EventInfo* e = (*trace)->event_by_id(t.event);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->full_name(), "dur:end");
  // Pair k is records 2k and 2k+1: the match is an end, its begin the record before.
  const uint64_t key = t.seq / 2;
  EXPECT_EQ(t.seq % 2, 1u);
  EXPECT_EQ(t.duration.kind, 1u);
  EXPECT_EQ(t.duration.begin_seq, t.seq - 1);
  EXPECT_EQ(t.duration.begin_tid, t.tid);
  EXPECT_EQ(t.duration.key, key);
  EXPECT_EQ(t.duration.key_hashed, 0u);
  EXPECT_GT(ticks_to_ms(**trace, t.duration.duration_ticks), 10.0);
  if (key == 1500) {
    EXPECT_GE(ticks_to_ms(**trace, t.duration.duration_ticks), 30.0);
  }
  // The threshold in ticks follows the tick rate's estimate, coarse in a process's first
  // milliseconds on a loaded machine.
  EXPECT_NEAR(ticks_to_ms(**trace, t.duration.threshold_ticks), 10.0, 0.5);
  Record r;
  ASSERT_TRUE(find_record(**trace, t.seq, &r, &readers));
  EXPECT_EQ(r.event->full_name(), "dur:end");
  EXPECT_EQ(r.values[0].bits, key);
  EXPECT_EQ(r.ticks, t.ticks);  // the matching record is stamped at the firing
  Record begin;
  ASSERT_TRUE(find_record(**trace, t.seq - 1, &begin, &readers));
  EXPECT_EQ(begin.event->full_name(), "dur:begin");
  EXPECT_EQ(begin.values[0].bits, key);
  EXPECT_EQ(begin.ticks, t.duration.begin_ticks);
  EXPECT_GE(r.ticks - begin.ticks, t.duration.duration_ticks);
  // The rings froze at the match: nothing after it.
  auto source = (*trace)->read_all();
  uint64_t last = 0;
  while (source->next(&r)) last = std::max(last, r.seq);
  EXPECT_EQ(last, t.seq);
  // The counts reach the header with the control thread's next pass.
  TriggerInfo counted = wait_for(
      run.pid, [&](const TriggerInfo& i) { return i.duration.pairs == key + 1; }, "the pairs");
  EXPECT_EQ(counted.duration.fires, 1u);
  EXPECT_EQ(counted.duration.unmatched_ends, 0u);
  EXPECT_EQ(counted.duration.unseen, 0u);
}

TEST(DurationRuntimeTest, AStuckOperationFiresWhileOpenAndIsNamed) {
  ProducerRun run({"stuck", "100", "20", "777"}, "dur:begin..dur:end by req open > 30ms");
  run.ready();  // the operation is open from here on, and never ends
  TriggerInfo t = wait_for(
      run.pid, [](const TriggerInfo& i) { return i.state == abi::TriggerState::kFrozen; },
      "the stuck trigger to freeze");
  auto trace = Trace::open_pid(run.pid);
  ASSERT_TRUE(trace.ok());
  std::vector<std::unique_ptr<RecordSource>> readers;
  t = (*trace)->process().trigger;
  const EventInfo* e = (*trace)->event_by_id(t.event);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->full_name(), "dur:begin");
  EXPECT_EQ(t.seq, 200u);  // after 100 pairs
  EXPECT_EQ(t.duration.kind, 2u);
  EXPECT_EQ(t.duration.begin_seq, 200u);
  EXPECT_EQ(t.duration.key, 777u);
  EXPECT_EQ(t.duration.stuck_count, 1u);
  EXPECT_GT(ticks_to_ms(**trace, t.duration.duration_ticks), 30.0);
  Record r;
  ASSERT_TRUE(find_record(**trace, 200, &r, &readers));
  EXPECT_EQ(r.event->full_name(), "dur:begin");
  EXPECT_EQ(r.values[0].bits, 777u);
  EXPECT_EQ(r.values[1].bits, 65536u);
  EXPECT_EQ(r.ticks, t.duration.begin_ticks);
  // Fired after the threshold, at the age it gives: the age is as of the firing's stamp (the
  // scan that found the operation was 1.1 ms earlier once, its thread descheduled).
  EXPECT_GT(t.ticks, r.ticks);
  EXPECT_EQ(t.ticks - r.ticks, t.duration.duration_ticks);
  // `status` names the open operation.
  int code = 0;
  const std::string out = testing::run_command(kCli + " status " + std::to_string(run.pid), &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("stuck: record #200 of thread"), std::string::npos) << out;
  EXPECT_NE(out.find("req=777 len=65536"), std::string::npos) << out;
  EXPECT_NE(out.find("> 30.00 ms"), std::string::npos) << out;
}

TEST(DurationRuntimeTest, FastPairsNeverFire) {
  ProducerRun run({"fast", "20000", "0"}, "dur:begin..dur:end by req > 2s");
  run.ready();
  TriggerInfo t = wait_for(
      run.pid, [](const TriggerInfo& i) { return i.duration.pairs == 20000; }, "20000 pairs");
  EXPECT_EQ(t.state, abi::TriggerState::kArmed);
  EXPECT_EQ(t.duration.fires, 0u);
  EXPECT_EQ(t.duration.unmatched_ends, 0u);
  EXPECT_EQ(t.duration.unseen, 0u);
  EXPECT_EQ(t.duration.replaced + t.duration.evicted, 0u);
}

TEST(DurationRuntimeTest, ThreadsPairWithoutLoss) {
  ProducerRun run({"threads", "4", "50000", "0"}, "dur:begin..dur:end by req open > 5s");
  run.ready();
  TriggerInfo t = wait_for(
      run.pid, [](const TriggerInfo& i) { return i.duration.pairs + i.duration.unseen >= 200000; },
      "200000 pairs");
  EXPECT_EQ(t.state, abi::TriggerState::kArmed);
  // Each record either paired or counted: none silently lost.
  EXPECT_EQ(t.duration.pairs + t.duration.unseen, 200000u);
  EXPECT_EQ(t.duration.unmatched_ends, 0u);
  EXPECT_LT(t.duration.unseen, 100u);
}

// Operations begun on one thread and ended on another pair as well: all of them (each
// thread's own table gives its begins up to the shared one), or one in sixteen (found in the
// beginning thread's own table); and none is left open. A slow trigger for the first (its
// open operations are counted each second), a stuck one for the second (aged meanwhile).
TEST(DurationRuntimeTest, OperationsEndedOnAnotherThreadPairWithoutLoss) {
  for (const std::string every : {"1", "16"}) {
    const std::string threshold = every == "1" ? "> 5s" : "open > 5s";
    ProducerRun run({"handoff", "3", "50000", every}, "dur:begin..dur:end by req " + threshold);
    run.ready();
    TriggerInfo t = wait_for(
        run.pid,
        [](const TriggerInfo& i) { return i.duration.pairs + i.duration.unseen >= 150000; },
        "150000 pairs");
    EXPECT_EQ(t.state, abi::TriggerState::kArmed) << every;
    EXPECT_EQ(t.duration.pairs + t.duration.unseen, 150000u) << every;
    EXPECT_EQ(t.duration.unmatched_ends, 0u) << every;
    EXPECT_EQ(t.duration.replaced + t.duration.evicted, 0u) << every;
    EXPECT_LT(t.duration.unseen, 100u) << every;
    t = wait_for(
        run.pid, [](const TriggerInfo& i) { return i.duration.open == i.duration.unseen; },
        "nothing open");
  }
}

// A stuck operation in the shared table, begun after scans found that table empty (they
// skip it while nothing begins there): named. Its thread's own table gave its begins up
// when another thread ended them.
TEST(DurationRuntimeTest, AStuckOperationOfTheSharedTableIsNamed) {
  ProducerRun run({"handoff", "1", "16", "1", "777"}, "dur:begin..dur:end by req open > 30ms");
  run.ready();  // the operation is open from here on, and never ends
  TriggerInfo t = wait_for(
      run.pid, [](const TriggerInfo& i) { return i.state == abi::TriggerState::kFrozen; },
      "the stuck trigger to freeze");
  EXPECT_EQ(t.duration.kind, 2u);
  EXPECT_EQ(t.duration.key, 777u);
  EXPECT_EQ(t.duration.pairs, 16u);
  EXPECT_EQ(t.duration.stuck_count, 1u);
}

// A key that never closes, a million times: the table stays its size, the oldest are counted
// as evicted, and the process's memory stays small.
TEST(DurationRuntimeTest, BeginsWithoutEndsStayInBoundedMemory) {
  ProducerRun run({"flood", "1000000"}, "dur:begin..dur:end by req > 1ms");
  run.ready();
  TriggerInfo t = wait_for(
      run.pid,
      [](const TriggerInfo& i) { return i.duration.capacity != 0 && i.duration.open != 0; },
      "the open operations counted");
  t = wait_for(
      run.pid, [](const TriggerInfo& i) { return i.duration.open + i.duration.evicted == 1000000; },
      "every begin open or evicted");
  EXPECT_LE(t.duration.open, t.duration.capacity);
  EXPECT_GE(t.duration.evicted, 1000000 - t.duration.capacity);
  std::ifstream status("/proc/" + std::to_string(run.pid) + "/status");
  std::string line;
  uint64_t rss_kb = 0;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss_kb = std::stoull(line.substr(6));
  }
  EXPECT_GT(rss_kb, 0u);
  EXPECT_LT(rss_kb, 64u * 1024);  // a 4 MiB ring, a 512 KiB table, the program
}

TEST(DurationRuntimeTest, UnknownEventsAndKeysAreRefusedInOneLine) {
  testing::ChildProcess child({kProducer, "--wait", "fast", "1", "0"}, {});
  const pid_t pid = std::stoi(child.read_line().substr(4));
  ASSERT_EQ(child.read_line(), "armed?");
  auto control = Controller::attach(std::to_string(pid));
  ASSERT_TRUE(control.ok()) << control.status().message();
  struct Case {
    const char* expression;
    const char* error;
  } cases[] = {
      {"dur:begin..dur:nope by req > 1ms", "no event dur:nope"},
      {"dur:nope..dur:end by req > 1ms", "no event dur:nope"},
      {"dur:begin..dur:end by reqq > 1ms", "event dur:begin has no field 'reqq' (the key)"},
      {"dur:begin..dur:end by req+len > 1ms", "event dur:end has no field 'len' (the key)"},
      {"dur:begin..dur:end by req > 1", "duration trigger: bad threshold '1'"},
  };
  for (const Case& c : cases) {
    Status s = (*control)->arm(c.expression, {});
    ASSERT_FALSE(s.ok()) << c.expression;
    EXPECT_NE(s.message().find(c.error), std::string::npos) << c.expression << ": " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
    // The command line says it in one line and fails.
    int code = 0;
    const std::string out = testing::run_command(
        kCli + " arm " + std::to_string(pid) + " '" + c.expression + "' 2>&1", &code);
    EXPECT_NE(code, 0) << c.expression;
    EXPECT_NE(out.find(c.error), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
  child.write_line("go");
  ASSERT_EQ(child.read_line().rfind("ready", 0), 0u);
}

// 1,000 slow pairs in about a third of a second, the program resuming after each freeze: the
// cap lets 5 fire and counts the other 995.
TEST(DurationRuntimeTest, TheCapHoldsBackAndCountsTheRest) {
  ProducerRun run({"resumed", "1000", "300"}, "dur:begin..dur:end by req > 100us cap 5 per 60s");
  EXPECT_EQ(run.ready(), 5u);  // resumes
  TriggerInfo t = wait_for(
      run.pid, [](const TriggerInfo& i) { return i.duration.pairs == 1000; }, "1000 pairs");
  EXPECT_EQ(t.duration.fires, 5u);
  EXPECT_EQ(t.duration.held_back, 995u);
  EXPECT_EQ(t.state, abi::TriggerState::kArmed);
}

TEST(DurationRuntimeTest, CooldownHoldsBackFiresTooSoonAfterOne) {
  ProducerRun run({"resumed", "200", "300"}, "dur:begin..dur:end by req > 100us cooldown 60s");
  EXPECT_EQ(run.ready(), 1u);
  TriggerInfo t = wait_for(
      run.pid, [](const TriggerInfo& i) { return i.duration.pairs == 200; }, "200 pairs");
  EXPECT_EQ(t.duration.fires, 1u);
  EXPECT_EQ(t.duration.held_back, 199u);
}

// A key of a string field and a number (in another order in the end event): pairs by the
// hash of their bytes; the window after the match works as for a record trigger.
TEST(DurationRuntimeTest, AKeyOfAStringAndANumberPairsAndTheWindowFollows) {
  ProducerRun run({"strings", "400"}, "str:begin..str:end by name+shard > 10ms",
                  {"NANOTRACE_TRIGGER_AFTER=100"});
  run.ready();
  auto trace = Trace::open_pid(run.pid);
  ASSERT_TRUE(trace.ok());
  std::vector<std::unique_ptr<RecordSource>> readers;
  const TriggerInfo t = (*trace)->process().trigger;
  ASSERT_EQ(t.state, abi::TriggerState::kFrozen);
  EXPECT_EQ(t.duration.kind, 1u);
  EXPECT_EQ(t.duration.key_hashed, 1u);
  Record r;  // its strings live until the next read
  ASSERT_TRUE(find_record(**trace, t.seq, &r, &readers));
  EXPECT_EQ(r.event->full_name(), "str:end");
  const std::string end_name(r.values[1].text);
  const uint64_t end_shard = r.values[0].bits;
  ASSERT_TRUE(find_record(**trace, t.duration.begin_seq, &r, &readers));
  EXPECT_EQ(r.event->full_name(), "str:begin");
  EXPECT_EQ(r.values[0].text, end_name);   // the same name
  EXPECT_EQ(r.values[1].bits, end_shard);  // and shard
  if (t.seq == 401) {
    EXPECT_EQ(end_name, "op-200");
  }
  // Exactly the window of 100 records after the match, then the freeze.
  auto source = (*trace)->read_all();
  uint64_t last = 0;
  while (source->next(&r)) last = std::max(last, r.seq);
  EXPECT_EQ(last, t.seq + 100);
}

// Other operations keep flowing while one is stuck: a writer whose record is stamped past the
// stuck one's deadline names it (or the control thread does, whichever comes first).
TEST(DurationRuntimeTest, AStuckOperationAmongFlowingOnesIsNamed) {
  char dir[] = "/tmp/nanotrace-duration-serve.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/stuck";
  ProducerRun run({"serve", file}, "dur:begin..dur:end by req open > 30ms");
  run.ready();
  std::ofstream(file).put('x');
  TriggerInfo t = wait_for(
      run.pid, [](const TriggerInfo& i) { return i.state == abi::TriggerState::kFrozen; },
      "the stuck trigger to freeze");
  EXPECT_EQ(t.duration.kind, 2u);
  EXPECT_EQ(t.duration.key, 424242u);
  EXPECT_GE(t.duration.stuck_count, 1u);
  auto trace = Trace::open_pid(run.pid);
  ASSERT_TRUE(trace.ok());
  std::vector<std::unique_ptr<RecordSource>> readers;
  EXPECT_GT(ticks_to_ms(**trace, t.duration.duration_ticks), 30.0);
  Record r;
  ASSERT_TRUE(find_record(**trace, t.seq, &r, &readers));
  EXPECT_EQ(r.event->full_name(), "dur:begin");
  EXPECT_EQ(r.values[0].bits, 424242u);
  run.child.close_stdin();
  std::remove(file.c_str());
  rmdir(dir);
}

// The durations (ms) of the pairs of dur:begin / dur:end by req in the process's rings that
// ended in the `window_ms` before the end record of the pair of key `fired`.
std::vector<double> durations_before_ms(Trace& trace, uint64_t fired, double window_ms) {
  std::vector<std::pair<uint64_t, double>> ends;  // end clock value, duration
  std::map<uint64_t, uint64_t> begins;
  uint64_t fired_end = 0;
  auto source = trace.read_all();
  Record r;
  while (source->next(&r)) {
    const uint64_t key = r.values[0].bits;
    if (r.event->full_name() == "dur:begin") {
      begins[key] = r.ticks;
    } else if (auto it = begins.find(key); it != begins.end()) {
      if (key == fired) fired_end = r.ticks;
      ends.emplace_back(r.ticks, ticks_to_ms(trace, r.ticks - it->second));
      begins.erase(it);
    }
  }
  std::vector<double> out;
  for (const auto& [end, ms] : ends) {
    if (end < fired_end && ticks_to_ms(trace, fired_end - end) <= window_ms) out.push_back(ms);
  }
  return out;
}

// A relative threshold: 300 pairs drifting from 5 ms to 7.5 ms do not fire by drifting; one
// pair at 20 x the p99 the trigger computed fires it. On a loaded machine a pair may wait
// for a CPU ten times longer than the others took: the trigger may fire on it, and then that
// pair must have been an outlier, over 10 x the p99 of the pairs before it in the rings.
TEST(DurationRuntimeTest, ARelativeThresholdFollowsADriftAndCatchesAnOutlier) {
  ProducerRun run({"drift", "300", "5000", "50"},
                  "dur:begin..dur:end by req > 10 x p99 over 2s warmup 50");
  ASSERT_EQ(run.child.read_line(), "drifted");
  TriggerInfo t = trigger_of(run.pid);
  auto trace = Trace::open_pid(run.pid);
  ASSERT_TRUE(trace.ok());
  if (t.state != abi::TriggerState::kArmed) {
    // Fired on a pair of the drift: over 10 x the p99 of its window (2 s, give or take an
    // epoch), so over 10 x the median of the pairs that ended in the 2 s before it.
    ASSERT_EQ(t.duration.kind, 1u);
    std::vector<double> before = durations_before_ms(**trace, t.duration.key, 2000);
    ASSERT_GE(before.size(), 40u) << "fired while warming up";
    std::sort(before.begin(), before.end());
    const double median = before[before.size() / 2];
    EXPECT_GT(ticks_to_ms(**trace, t.duration.duration_ticks), 10 * median * 0.9)
        << "fired on pair " << t.duration.key << " of the drift, not an outlier";
    auto control = Controller::attach(std::to_string(run.pid));
    ASSERT_TRUE(control.ok());
    ASSERT_TRUE((*control)->resume().ok());
  }
  t = wait_for(
      run.pid,
      [](const TriggerInfo& i) {
        return i.duration.current_threshold_ticks != 0 &&
               i.duration.current_threshold_ticks != ~uint64_t{0};
      },
      "a threshold");
  const double threshold_ms = ticks_to_ms(**trace, t.duration.current_threshold_ticks);
  // p99 of 5-7.5 ms pairs, read from 12.5 % buckets: 10 x that is 50 to 100 ms or so (more
  // if the machine's waits made the p99).
  EXPECT_GT(threshold_ms, 50.0);
  const uint64_t fires = t.duration.fires;
  run.child.write_line(std::to_string(threshold_ms / 10 * 20 * 1000));
  run.ready();
  t = wait_for(
      run.pid,
      [&](const TriggerInfo& i) {
        return i.state == abi::TriggerState::kFrozen && i.duration.fires > fires;
      },
      "the outlier to fire");
  EXPECT_EQ(t.duration.kind, 1u);
  EXPECT_EQ(t.duration.key, 300u);  // the outlier
  EXPECT_GT(ticks_to_ms(**trace, t.duration.duration_ticks), threshold_ms);
}

}  // namespace
}  // namespace nanotrace
