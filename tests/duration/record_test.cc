// Duration triggers in the recorder: `record --stop-on` stops on a stuck operation and names
// it, and on a slow pair; `--snapshot-on` with a cap fires the capped number of times and
// counts the rest; an unknown event or key is refused before anything is recorded.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/child_process.hpp"
#include "duration/programs.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using duration_test::kCli;
using duration_test::kProducer;

class DurationRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/nanotrace-duration-record.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }

  // Starts the producer (waiting to be told, after one fast pair: records 0 and 1), records it with
  // `options` in another thread, lets the producer run once the recorder is attached, then ends the
  // producer once it is done. Returns the recorder's output (stdout and stderr) and its exit code
  // in *code.
  std::string record(const std::vector<std::string>& scenario, const std::string& options,
                     int* code) {
    std::vector<std::string> argv = {kProducer, "--wait"};
    argv.insert(argv.end(), scenario.begin(), scenario.end());
    testing::ChildProcess producer(argv, {"NANOTRACE_BUFFER=4M"});
    const pid_t pid = std::stoi(producer.read_line().substr(4));
    EXPECT_EQ(producer.read_line(), "armed?");
    std::string out;
    std::thread recorder([&] {
      out = testing::run_command(
          kCli + " record " + std::to_string(pid) + " -o " + dir_ + "/t.ntr " + options + " 2>&1",
          code);
    });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto t = Trace::open_pid(pid);
      if (t.ok() && (*t)->process().consumer_pid != 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    producer.write_line("go");
    EXPECT_EQ(producer.read_line().rfind("ready", 0), 0u);
    // A stuck operation stops the recorder by itself; otherwise the producer's exit ends it.
    if (options.find(" open ") != std::string::npos) recorder.join();
    producer.close_stdin();
    producer.wait();
    if (recorder.joinable()) recorder.join();
    return out;
  }

  std::string dir_;
};

TEST_F(DurationRecordTest, StopsOnAStuckOperationAndNamesIt) {
  int code = 0;
  const std::string out = record({"stuck", "100", "20", "777"},
                                 "--stop-on 'dur:begin..dur:end by req open > 50ms'", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("stop-on matched"), std::string::npos) << out;
  EXPECT_NE(out.find("stopped on record 202 (dur:begin, req 777) of thread"), std::string::npos)
      << out;
  EXPECT_NE(out.find("an operation open"), std::string::npos) << out;
  EXPECT_NE(out.find("--stop-on: 101 pairs, 0 ends without a begin"), std::string::npos) << out;
  // The file holds the open operation's begin, and no end of it.
  auto trace = Trace::open(dir_ + "/t.ntr");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  auto source = (*trace)->read_all();
  Record r;
  bool begin = false, end = false;
  while (source->next(&r)) {
    if (r.values[0].bits != 777) continue;
    begin = begin || r.event->full_name() == "dur:begin";
    end = end || r.event->full_name() == "dur:end";
  }
  EXPECT_TRUE(begin);
  EXPECT_FALSE(end);
}

TEST_F(DurationRecordTest, StopsOnASlowPair) {
  int code = 0;
  const std::string out = record({"slow", "2000", "0", "30000", "1500"},
                                 "--stop-on 'dur:begin..dur:end by req > 10ms'", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("stop-on matched"), std::string::npos) << out;
  // The pair named took over the threshold: normally pair 1500; on a loaded machine perhaps
  // one descheduled before it.
  EXPECT_NE(out.find("the end of a pair begun by record"), std::string::npos) << out;
  EXPECT_NE(out.find(" ms (> 10.000 ms)"), std::string::npos) << out;
  EXPECT_NE(out.find(", 1 fires, 0 held back"), std::string::npos) << out;
}

// A key of a string and a number, hashed as the runtime hashes it.
TEST_F(DurationRecordTest, StopsOnASlowPairOfAStringKey) {
  int code = 0;
  const std::string out =
      record({"strings", "400"}, "--stop-on 'str:begin..str:end by name+shard > 10ms'", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("stop-on matched"), std::string::npos) << out;
  EXPECT_NE(out.find("(str:end shard="), std::string::npos) << out;
  EXPECT_NE(out.find(", 0 ends without a begin"), std::string::npos) << out;
}

// 300 pairs of 300 us, every one slow (and the one --wait writes first, fast): a cap of 2
// fires twice and holds back 298. (The
// snapshot itself waits for the recorder's one-a-second pace, past this short recording.)
TEST_F(DurationRecordTest, SnapshotOnHonoursTheCapAndCountsTheRest) {
  int code = 0;
  const std::string out =
      record({"resumed", "300", "300"},
             "--snapshot-on 'dur:begin..dur:end by req > 100us cap 2 per 60s'", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("--snapshot-on: 301 pairs, 0 ends without a begin, 0 begins replaced, "
                     "0 evicted, 0 not seen in time, 2 fires, 298 held back"),
            std::string::npos)
      << out;
}

TEST_F(DurationRecordTest, UnknownEventOrKeyIsRefusedBeforeRecording) {
  testing::ChildProcess producer({kProducer, "--wait", "fast", "1", "0"}, {});
  const pid_t pid = std::stoi(producer.read_line().substr(4));
  ASSERT_EQ(producer.read_line(), "armed?");
  for (const auto& [expression, error] : std::vector<std::pair<std::string, std::string>>{
           {"dur:begin..dur:nope by req > 1ms", "--stop-on: no event dur:nope"},
           {"dur:begin..dur:end by reqq > 1ms",
            "--stop-on: event dur:begin has no field 'reqq' (the key)"}}) {
    int code = 0;
    const std::string out =
        testing::run_command(kCli + " record " + std::to_string(pid) + " -o " + dir_ +
                                 "/bad.ntr --stop-on '" + expression + "' 2>&1",
                             &code);
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find(error), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(access((dir_ + "/bad.ntr").c_str(), F_OK), 0);  // nothing recorded
  }
  producer.write_line("go");
}

}  // namespace
}  // namespace nanotrace
