// The live view on a real traced program (waiter_program): the operation that never ends is
// listed with its key, thread and fields and an age that grows; operations that complete
// give rates and latencies; a ring that wraps between two samples is counted as missed; the
// view consumes nothing; bad sources and rules are one-line errors.
#include "live/live_view.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/child_process.hpp"
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

}  // namespace
}  // namespace nanotrace::live
