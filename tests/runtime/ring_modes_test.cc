// Ring behaviour in each mode, observed from another process through the reader: overwrite
// keeps the newest records and counts the rest, discard keeps the oldest and counts the
// drops exactly, block loses nothing while a consumer drains. Also the merge order over
// threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/child_process.hpp"
#include "common/records.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;

const std::string kProducer = std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer";

std::unique_ptr<Trace> open_or_die(pid_t pid, bool writable = false) {
  auto t = Trace::open_pid(pid, writable);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t.value()) : nullptr;
}

// Starts a producer holding its segment open after producing.
struct HeldProducer {
  ChildProcess child;
  pid_t pid = 0;
  HeldProducer(const std::vector<std::string>& args, const std::vector<std::string>& env)
      : child(args, env) {
    std::string line = child.read_line();
    pid = static_cast<pid_t>(std::stol(line.substr(4)));
    EXPECT_EQ(child.read_line(), "ready");
  }
  ~HeldProducer() {
    child.close_stdin();
    child.wait();
  }
};

TEST(RingModesTest, OverwriteKeepsNewestAndCountsTheRest) {
  const uint64_t n = 20000;
  HeldProducer p({kProducer, "--events", std::to_string(n), "--hold"},
                 {"NANOTRACE_MODE=overwrite", "NANOTRACE_BUFFER=64K"});
  auto trace = open_or_die(p.pid);
  ASSERT_TRUE(trace);
  auto result = testing::read_test_records(*trace);
  ASSERT_EQ(result.bad_checksums, 0u);
  ASSERT_FALSE(result.records.empty());
  ASSERT_LT(result.records.size(), n);  // the ring wrapped
  // A contiguous suffix ending with the last record, record seq == payload seq.
  for (size_t i = 0; i < result.records.size(); ++i) {
    EXPECT_EQ(result.records[i].seq, n - result.records.size() + i);
    EXPECT_EQ(result.records[i].record_seq, result.records[i].seq);
  }
  ASSERT_EQ(result.threads.size(), 1u);
  const ThreadStats& s = result.threads[0];
  EXPECT_EQ(s.overwritten, result.records.front().seq);
  EXPECT_EQ(s.overwritten + s.records, n);
  EXPECT_EQ(s.dropped, 0u);
  // 64 KiB at 40 bytes a record, less the blocks a live writer may be touching.
  EXPECT_GT(result.records.size(), 1000u);
}

TEST(RingModesTest, DiscardKeepsOldestAndCountsDropsExactly) {
  const uint64_t n = 20000;
  HeldProducer p({kProducer, "--events", std::to_string(n), "--hold"},
                 {"NANOTRACE_MODE=discard", "NANOTRACE_BUFFER=64K"});
  auto trace = open_or_die(p.pid);
  ASSERT_TRUE(trace);
  auto result = testing::read_test_records(*trace);
  ASSERT_EQ(result.bad_checksums, 0u);
  ASSERT_FALSE(result.records.empty());
  for (size_t i = 0; i < result.records.size(); ++i) EXPECT_EQ(result.records[i].seq, i);
  const ThreadStats& s = result.threads.at(0);
  EXPECT_EQ(s.overwritten, 0u);
  EXPECT_EQ(s.dropped, n - result.records.size());
  EXPECT_EQ(s.records + s.dropped, n);
}

// The writers wait for the consumer as long as it lives (NANOTRACE_BLOCK_TIMEOUT=inf): with
// the default bound (100 ms, then drops, counted) a test thread descheduled that long on a
// loaded machine would cost records, which is not what this test is about.
TEST(RingModesTest, BlockModeLosesNothingWithAConsumer) {
  const uint64_t n = 300000, threads = 2;
  ChildProcess child(
      {kProducer, "--threads", std::to_string(threads), "--events", std::to_string(n), "--go"},
      {"NANOTRACE_MODE=block", "NANOTRACE_BLOCK_TIMEOUT=inf", "NANOTRACE_BUFFER=64K"});
  pid_t pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
  auto trace = open_or_die(pid, /*writable=*/true);
  ASSERT_TRUE(trace);
  ASSERT_TRUE(trace->attach_consumer().ok());
  ASSERT_EQ(write(STDOUT_FILENO, "", 0), 0);
  child.close_stdin();                    // a closed stdin ends the --go wait
  std::map<uint64_t, uint64_t> next_seq;  // producer thread -> expected seq
  uint64_t total = 0, lost = 0;
  bool exited = false;
  for (int idle = 0; idle < 3;) {
    auto result = testing::read_test_records(*trace, /*consume=*/true);
    ASSERT_EQ(result.bad_checksums, 0u);
    for (const auto& r : result.records) {
      ASSERT_EQ(r.seq, next_seq[r.thread]) << "thread " << r.thread;
      next_seq[r.thread] = r.seq + 1;
    }
    for (const auto& t : result.threads) lost += t.lost();
    total += result.records.size();
    if (!exited && waitpid(pid, nullptr, WNOHANG) == pid) exited = true;
    idle = (exited && result.records.empty()) ? idle + 1 : 0;
    if (result.records.empty()) usleep(1000);
  }
  EXPECT_EQ(total, n * threads);
  EXPECT_EQ(lost, 0u);
  for (uint64_t t = 0; t < threads; ++t) EXPECT_EQ(next_seq[t], n);
  unlink(testing::segment_of(pid).c_str());
}

TEST(RingModesTest, BlockModeWithoutConsumerDropsAndCounts) {
  const uint64_t n = 20000;
  HeldProducer p({kProducer, "--events", std::to_string(n), "--hold"},
                 {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=64K"});
  auto trace = open_or_die(p.pid);
  ASSERT_TRUE(trace);
  auto result = testing::read_test_records(*trace);
  const ThreadStats& s = result.threads.at(0);
  EXPECT_GT(s.dropped, 0u);
  EXPECT_EQ(s.records + s.dropped, n);
}

// A reader that does not consume (`nanotrace stats`, `dump` of a live process) after a
// consumer took part of a ring: it starts where the consumer is, and the records taken are
// not counted as overwritten.
TEST(RingModesTest, AReaderAfterAConsumerCountsNothingTakenAsLost) {
  const uint64_t n = 1000;
  HeldProducer p({kProducer, "--events", std::to_string(n), "--hold"},
                 {"NANOTRACE_MODE=block", "NANOTRACE_BUFFER=1M"});
  auto consumer = open_or_die(p.pid, /*writable=*/true);
  ASSERT_TRUE(consumer);
  ASSERT_TRUE(consumer->attach_consumer().ok());
  auto taken = testing::read_test_records(*consumer, /*consume=*/true);
  ASSERT_EQ(taken.records.size(), n);
  auto observer = open_or_die(p.pid);
  ASSERT_TRUE(observer);
  auto seen = testing::read_test_records(*observer);
  const ThreadStats& s = seen.threads.at(0);
  EXPECT_EQ(s.records, 0u);
  EXPECT_EQ(s.overwritten, 0u);
  EXPECT_EQ(s.dropped, 0u);
  int code = 0;
  const std::string out = testing::run_command(
      std::string(NANOTRACE_BIN_DIR) + "/nanotrace stats " + std::to_string(p.pid) + " --json",
      &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["lost"].get<uint64_t>(), 0u) << out;
}

TEST(RingModesTest, MergeOrdersThreadsByTimeAndKeepsThreadOrder) {
  const uint64_t n = 5000, threads = 4;
  HeldProducer p(
      {kProducer, "--threads", std::to_string(threads), "--events", std::to_string(n), "--hold"},
      {"NANOTRACE_BUFFER=4M"});
  auto trace = open_or_die(p.pid);
  ASSERT_TRUE(trace);
  auto result = testing::read_test_records(*trace);
  ASSERT_EQ(result.records.size(), n * threads);
  ASSERT_EQ(result.bad_checksums, 0u);
  std::map<uint64_t, uint64_t> next_seq;
  std::set<uint32_t> streams;
  for (size_t i = 0; i < result.records.size(); ++i) {
    const auto& r = result.records[i];
    if (i > 0) {
      const auto& prev = result.records[i - 1];
      EXPECT_TRUE(prev.ticks < r.ticks || (prev.ticks == r.ticks && prev.stream <= r.stream))
          << "record " << i << " out of time order";
    }
    EXPECT_EQ(r.seq, next_seq[r.thread]);
    next_seq[r.thread] = r.seq + 1;
    streams.insert(r.stream);
  }
  EXPECT_EQ(streams.size(), threads);
}

// A record keeps 48 bits of its clock value, read against its block's base: an idle thread's
// block must not stay open longer than that can span (hours). With the limit made short
// (NANOTRACE_BLOCK_MAX_AGE), records 300 ms apart start blocks of their own (each one the
// control thread passed by in between: all of them unless a busy machine starves it), each
// block based when its first record came; with the default they share one block. Every
// record intact and in order either way.
TEST(RingModesTest, AnIdleThreadsOldBlockIsEndedByItsNextRecord) {
  for (const bool short_limit : {true, false}) {
    SCOPED_TRACE(short_limit ? "NANOTRACE_BLOCK_MAX_AGE=50ms" : "the default limit");
    std::vector<std::string> env;
    if (short_limit) env.push_back("NANOTRACE_BLOCK_MAX_AGE=50ms");
    HeldProducer p({kProducer, "--events", "4", "--pace", "300", "--hold"}, env);
    auto trace = open_or_die(p.pid);
    ASSERT_TRUE(trace);
    auto spans = trace->read_spans();
    ASSERT_EQ(spans.size(), 1u);
    std::vector<RecordSpan> blocks;
    for (RecordSpan span; spans[0]->next(&span);) blocks.push_back(span);
    EXPECT_EQ(spans[0]->stats().overwritten, 0u);
    const auto records = testing::read_test_records(*trace).records;
    ASSERT_EQ(records.size(), 4u);
    for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i].seq, i);
    if (!short_limit) {
      EXPECT_EQ(blocks.size(), 1u);
      continue;
    }
    ASSERT_GE(blocks.size(), 2u);
    const double ticks_per_ms = static_cast<double>(trace->process().ticks_per_second) / 1e3;
    for (const RecordSpan& block : blocks) {
      ASSERT_LT(block.first_seq, records.size());
      const uint64_t age = records[block.first_seq].ticks - block.base_ticks;
      EXPECT_LT(static_cast<double>(age), 50 * ticks_per_ms)
          << "block of record " << block.first_seq;
    }
  }
}

}  // namespace
}  // namespace nanotrace
