// The live view on a real traced program (waiter_program): the operation that never ends is
// listed with its key, thread and fields and an age that grows; operations that complete
// give rates and latencies; a ring that wraps between two samples is counted as missed; the
// view consumes nothing; bad sources and rules are one-line errors.
#include "live/live_view.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "common/child_process.hpp"
#include "nanotrace/analysis.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::live {
namespace {

const std::string kBin = NANOTRACE_BIN_DIR;

struct Program {
  explicit Program(std::vector<std::string> args = {}, std::string env = "NANOTRACE_BUFFER=64K")
      : child(with_path(std::move(args)), {std::move(env)}) {
    std::string first = child.read_line();
    pid = std::stoi(first.substr(4));
    EXPECT_EQ(child.read_line(), "ready");
  }
  static std::vector<std::string> with_path(std::vector<std::string> args) {
    args.insert(args.begin(), kBin + "/waiter_program");
    return args;
  }
  // Ends the program as it ends on its own (stdin closed), so that it removes its segment (a
  // killed one would leave it in /dev/shm).
  ~Program() {
    child.close_stdin();
    child.wait();
  }
  void command(const std::string& line) {
    child.write_line(line);
    ASSERT_EQ(child.read_line(), "done") << line;
  }
  testing::ChildProcess child;
  int pid = 0;
};

const LivePair* find_pair(const LiveFrame& f, const std::string& begin) {
  for (const LivePair& p : f.pairs) {
    if (p.rule.begin == begin) return &p;
  }
  return nullptr;
}

const LiveEvent* find_event(const LiveFrame& f, const std::string& name) {
  for (const LiveEvent& e : f.events) {
    if (e.event == name) return &e;
  }
  return nullptr;
}

TEST(LiveViewTest, ShowsTheWaiterRatesLatencyAndMisses) {
  Program program({"--stuck-text", "sdq"});
  LiveOptions options;
  options.sources = {std::to_string(program.pid)};
  auto view = LiveView::create(options);
  ASSERT_TRUE(view.ok()) << view.status().message();
  // The first sample reads the past: the stuck operations, no rates.
  LiveFrame first = (*view)->sample();
  EXPECT_EQ(first.sequence, 0u);
  ASSERT_EQ(first.waiters.size(), 2u);
  EXPECT_TRUE(first.events.empty());
  const LiveWaiter* stuck = nullptr;
  const LiveWaiter* text = nullptr;
  for (const LiveWaiter& w : first.waiters) (w.rule.begin == "io:submit" ? stuck : text) = &w;
  ASSERT_TRUE(stuck && text);
  EXPECT_EQ(stuck->key, "424242");
  EXPECT_EQ(stuck->thread, "stuck-worker");
  EXPECT_EQ(stuck->pid, static_cast<uint32_t>(program.pid));
  EXPECT_NE(stuck->fields.find("path=/data/stuck"), std::string::npos) << stuck->fields;
  EXPECT_EQ(stuck->rule.end, "io:complete");
  EXPECT_EQ(stuck->rule.key, "req");
  EXPECT_FALSE(stuck->end_may_be_lost);
  EXPECT_EQ(text->key, "sdq");
  EXPECT_EQ(text->rule.end, "dev:lock_end");
  const uint64_t age0 = stuck->age_ns;

  program.command("ops 200");
  LiveFrame second = (*view)->sample();
  ASSERT_FALSE(second.waiters.empty());
  EXPECT_EQ(second.waiters.size(), 2u);  // every completed operation left the table
  EXPECT_GT(second.waiters[0].age_ns, age0);
  const LivePair* io = find_pair(second, "io:submit");
  ASSERT_NE(io, nullptr);
  EXPECT_TRUE(io->inferred);
  EXPECT_EQ(io->last.count, 200u);
  EXPECT_EQ(io->total.count, 200u);
  EXPECT_GE(io->last.p50_ns, 90000u);  // each slept 100 us between begin and end
  EXPECT_GE(io->last.max_ns, io->last.p99_ns);
  EXPECT_EQ(io->open, 1u);
  EXPECT_GE(io->oldest_open_ns, second.waiters[0].age_ns / 2);
  const LiveEvent* submit = find_event(second, "io:submit");
  ASSERT_NE(submit, nullptr);
  EXPECT_EQ(submit->count, 200u);
  EXPECT_GT(submit->per_second, 0);
  ASSERT_EQ(second.processes.size(), 1u);
  EXPECT_EQ(second.processes[0].missed, 0u);
  EXPECT_EQ(second.processes[0].records, 400u);

  // 64 KiB ring, 16-byte records: 20,000 wrap it several times before the next sample.
  program.command("flood 20000");
  LiveFrame third = (*view)->sample();
  ASSERT_EQ(third.processes.size(), 1u);
  EXPECT_GT(third.processes[0].missed, 0u);
  EXPECT_EQ(third.processes[0].missed_interval, third.processes[0].missed);
  const LiveEvent* tick = find_event(third, "noise:tick");
  ASSERT_NE(tick, nullptr);
  EXPECT_EQ(tick->count + third.processes[0].missed, 20000u);  // read or counted, none silent
  // The stuck operation's thread lost nothing, but the process did: its end may be lost.
  ASSERT_FALSE(third.waiters.empty());
  EXPECT_TRUE(third.waiters[0].end_may_be_lost);

  program.command("end");
  LiveFrame fourth = (*view)->sample();
  io = find_pair(fourth, "io:submit");
  ASSERT_NE(io, nullptr);
  EXPECT_EQ(io->open, 0u);
  EXPECT_EQ(io->last.count, 1u);
  EXPECT_GT(io->last.max_ns, age0);
  ASSERT_EQ(fourth.waiters.size(), 1u);
  EXPECT_EQ(fourth.waiters[0].key, "sdq");

  // Nothing was consumed: no consumer, and `dump` still reads the stuck operation's end.
  auto trace = Trace::open_pid(program.pid);
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ((*trace)->process().consumer_pid, 0u);
  for (const ThreadInfo& t : (*trace)->threads()) EXPECT_EQ(t.consumed_records, 0u) << t.name;
}

TEST(LiveViewTest, GivenRulesAndTheJsonOfAFrame) {
  Program program;
  LiveOptions options;
  options.sources = {std::to_string(program.pid)};
  options.rules = {{"io:submit", "io:complete", "req"}};
  auto view = LiveView::create(options);
  ASSERT_TRUE(view.ok()) << view.status().message();
  (*view)->sample();
  program.command("ops 20");
  LiveFrame f = (*view)->sample();
  ASSERT_EQ(f.pairs.size(), 1u);  // only the rule given
  EXPECT_FALSE(f.pairs[0].inferred);
  EXPECT_EQ(f.pairs[0].last.count, 20u);
  auto back = parse_frame_json(frame_json(f));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->waiters.size(), 1u);
  EXPECT_EQ(back->waiters[0].key, "424242");
  EXPECT_EQ(back->pairs[0].last.count, 20u);
}

TEST(LiveViewTest, BadSourcesAndRulesAreOneLineErrors) {
  Program program;
  LiveOptions options;
  options.sources = {std::to_string(program.pid)};
  options.rules = {{"io:submit", "io:nope", "req"}};
  auto view = LiveView::create(options);
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find("io:nope"), std::string::npos);
  EXPECT_EQ(view.status().message().find('\n'), std::string::npos);
  options.rules = {{"io:submit", "io:complete", "nokey"}};
  view = LiveView::create(options);
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find("nokey"), std::string::npos);
  options.rules.clear();
  options.sources = {"999999999"};
  EXPECT_FALSE(LiveView::create(options).ok());
  options.sources = {"name:no-such-process-name"};
  EXPECT_FALSE(LiveView::create(options).ok());
}

TEST(LiveViewTest, AnExitedProcessIsShownThenForgotten) {
  LiveOptions options;
  std::unique_ptr<LiveView> view;
  {
    Program program;
    options.sources = {std::to_string(program.pid)};
    auto created = LiveView::create(options);
    ASSERT_TRUE(created.ok());
    view = std::move(*created);
    view->sample();
    program.command("ops 5");
    program.child.close_stdin();
    program.child.wait();
  }
  LiveFrame f = view->sample();
  ASSERT_EQ(f.processes.size(), 1u);
  EXPECT_FALSE(f.processes[0].alive);
  EXPECT_EQ(f.processes[0].records, 10u);  // its last records were read
  EXPECT_TRUE(f.waiters.empty());          // nothing waits in a process that is gone
  for (int i = 0; i < 5; ++i) f = view->sample();
  EXPECT_TRUE(f.processes.empty());
  const LivePair* io = find_pair(f, "io:submit");
  ASSERT_NE(io, nullptr);
  EXPECT_EQ(io->total.count, 5u);  // since start, the process gone
}

// What `nanotrace latency` makes of the same records: the reference for the live view.
LatencyReport offline_latency(int pid, const PairRule& rule) {
  auto trace = Trace::open_pid(pid);
  EXPECT_TRUE(trace.ok());
  auto matcher = PairMatcher::create(**trace, rule, "", 0);
  EXPECT_TRUE(matcher.ok()) << matcher.status().message();
  (*matcher)->add_all(**trace);
  return (*matcher)->finish();
}

const LivePair* find_rule(const LiveFrame& f, const PairRule& rule) {
  for (const LivePair& p : f.pairs) {
    if (p.rule.label() == rule.label()) return &p;
  }
  return nullptr;
}

std::vector<PairRule> mix_rules() {
  return {*parse_pair_rule("mix:op_begin,mix:op_end,id"),
          *parse_pair_rule("mix:lock_begin,mix:lock_end,name")};
}

// Operations begun on one thread and ended on another, while a third thread reuses their
// keys: the live view reads each thread's ring in turn, yet matches in time order across
// threads as the latency analysis does. All of it is read in one pass: counts, replaced
// begins, ends without a begin and operations left open are the analysis's exactly.
TEST(LiveViewTest, PairsAcrossThreadsAsTheLatencyAnalysisDoes) {
  Program program({}, "NANOTRACE_BUFFER=4M");
  LiveOptions options;
  options.sources = {std::to_string(program.pid)};
  options.rules = mix_rules();
  auto view = LiveView::create(options);
  ASSERT_TRUE(view.ok()) << view.status().message();
  (*view)->sample();
  program.command("mix 20000 61");
  const LiveFrame read = (*view)->sample();
  // Two more passes: an end without a begin is waited for one pass, then unmatched.
  (*view)->sample();
  const LiveFrame settled = (*view)->sample();
  ASSERT_EQ(read.processes.size(), 1u);
  EXPECT_EQ(read.processes[0].missed, 0u);
  uint64_t anomalies = 0;
  for (const PairRule& rule : mix_rules()) {
    SCOPED_TRACE(rule.label());
    const LatencyReport want = offline_latency(program.pid, rule);
    const LivePair* in_pass = find_rule(read, rule);
    const LivePair* got = find_rule(settled, rule);
    ASSERT_TRUE(in_pass && got);
    EXPECT_EQ(in_pass->last.count, want.overall.count);
    EXPECT_EQ(got->total.count, want.overall.count);
    EXPECT_EQ(got->replaced + got->open, want.overall.unmatched_begins);
    EXPECT_EQ(got->unmatched_ends, want.unmatched_ends);
    // The two read the clock rate from the segment at different times: ppm apart.
    EXPECT_NEAR(static_cast<double>(got->total.max_ns), static_cast<double>(want.overall.max_ns),
                1e-3 * static_cast<double>(want.overall.max_ns) + 1);
    EXPECT_NEAR(static_cast<double>(got->total.p50_ns), static_cast<double>(want.overall.p50_ns),
                static_cast<double>(want.overall.p50_ns) / 32 + 1);
    anomalies += want.overall.unmatched_begins + want.unmatched_ends;
  }
  EXPECT_GT(anomalies, 0u) << "the keys did not collide: the test proves less than it says";
}

// The same with every key new, sampled while the three threads run: a pass can read an end
// whose begin, on a thread read earlier, was written just after that thread was read. That
// end is kept for the next pass, where its begin pairs with it: every operation pairs once,
// whatever the passes cut. The program waits for two passes after every 10,000 operations
// (one SIGUSR1 each), so passes cut the run however slowly they go (ASan, a loaded machine).
TEST(LiveViewTest, PairsAcrossThreadsWhilePassesCutThem) {
  Program program({}, "NANOTRACE_BUFFER=4M");
  LiveOptions options;
  options.sources = {std::to_string(program.pid)};
  options.rules = mix_rules();
  auto view = LiveView::create(options);
  ASSERT_TRUE(view.ok()) << view.status().message();
  (*view)->sample();
  std::atomic<bool> done{false};
  uint64_t passes = 0;
  std::thread sampler([&] {
    while (!done.load()) {
      (*view)->sample();
      ++passes;
      kill(program.pid, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  program.command("mix 40000 0");
  done = true;
  sampler.join();
  LiveFrame f;
  for (int i = 0; i < 3; ++i) f = (*view)->sample();
  EXPECT_GE(passes, 6u);  // three checkpoints, two passes each
  ASSERT_EQ(f.processes.size(), 1u);
  EXPECT_EQ(f.processes[0].missed, 0u);
  for (const PairRule& rule : mix_rules()) {
    SCOPED_TRACE(rule.label());
    const LatencyReport want = offline_latency(program.pid, rule);
    // Operations: the submit thread's and the local thread's; locks: the submit thread's.
    EXPECT_EQ(want.overall.count, rule.begin == "mix:op_begin" ? 80000u : 40000u);
    EXPECT_EQ(want.overall.unmatched_begins + want.unmatched_ends, 0u);
    const LivePair* got = find_rule(f, rule);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->total.count, want.overall.count);
    EXPECT_EQ(got->open, 0u);
    EXPECT_EQ(got->replaced, 0u);
    EXPECT_EQ(got->unmatched_ends, 0u);
  }
}

}  // namespace
}  // namespace nanotrace::live
