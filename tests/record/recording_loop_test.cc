// The one recording loop with each of its sources, on real traced producers: one process
// (`record PID`), several (`record PID PID`) and a command's process tree (`run -- CMD`).
// Every feature must behave the same for each: --stop-on ends right after the match,
// --snapshot-on writes a snapshot of every process recorded, losses while the recorder
// could not run are counted exactly, --duration ends the recording, progress reports reach
// the final count; and a source of the fleet agent's shape (processes found as they start,
// a snapshot asked from outside, never over on its own) drives the same loop; the pacing
// they share. Kernel events with each source: kernel_test.cc, multi_record_test.cc,
// run_test.cc; kernel flight windows with each source: kernel_flight_test.cc.
#include "record/recording_loop.hpp"

#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "base/process.hpp"
#include "nanotrace/record.hpp"
#include "record/drain_pacing.hpp"
#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;
using testing::kCli;
using testing::kProducer;

enum class Source { kOne, kSeveral, kRun };

std::string source_name(const ::testing::TestParamInfo<Source>& info) {
  return info.param == Source::kOne       ? "OneProcess"
         : info.param == Source::kSeveral ? "SeveralProcesses"
                                          : "CommandTree";
}

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// Test producers (`producer_args` plus --go, so that they start once recorded) recorded into
// file by the source: started by the test and named to `record`, or started by `run`.
class Recording {
 public:
  Recording(Source source, const std::vector<std::string>& producer_args,
            const std::vector<std::string>& env, const std::string& extra, const std::string& file)
      : source_(source), file_(file) {
    std::vector<std::string> args = {kProducer};
    args.insert(args.end(), producer_args.begin(), producer_args.end());
    args.push_back("--go");
    if (source == Source::kRun) {
      std::string command = "exec " + kCli + " run -o " + file + " " + extra + " --";
      for (const std::string& a : args) command += " " + a;
      recorder_ = std::make_unique<ChildProcess>(
          std::vector<std::string>{"/bin/sh", "-c", command + " 2>" + file + ".err"}, env);
      pids_.push_back(testing::read_pid(*recorder_));
    } else {
      std::string command = "exec " + kCli + " record";
      for (int i = 0; i < (source == Source::kOne ? 1 : 2); ++i) {
        producers_.push_back(std::make_unique<ChildProcess>(args, env));
        pids_.push_back(testing::read_pid(*producers_.back()));
        command += " " + std::to_string(pids_.back());
      }
      recorder_ = std::make_unique<ChildProcess>(
          std::vector<std::string>{"/bin/sh", "-c",
                                   command + " -o " + file + " " + extra + " 2>&1"},
          std::vector<std::string>{});
    }
    for (pid_t p : pids_) ready_ = ready_ && p > 0 && testing::wait_consumer(p);
  }
  ~Recording() {
    std::remove(file_.c_str());
    std::remove((file_ + ".err").c_str());
    for (int i = 1; i < 4; ++i) std::remove((file_ + ".snap" + std::to_string(i)).c_str());
  }

  bool ready() const { return ready_; }
  const std::vector<pid_t>& pids() const { return pids_; }
  pid_t recorder() const { return recorder_->pid(); }
  void go() {
    for (auto& p : producers_) p->write_line("go");
    if (source_ == Source::kRun) recorder_->write_line("go");
  }
  // A line each producer prints (e.g. "ready" after producing, with --hold).
  bool each_printed(const std::string& line) {
    bool all = true;
    for (auto& p : producers_) all = all && p->read_line() == line;
    if (source_ == Source::kRun) all = all && recorder_->read_line() == line;
    return all;
  }
  // Lets the producers end (after the recorder ended on its own if recorder_first); returns
  // the recorder's exit status, its messages in *out.
  int finish(std::string* out, bool recorder_first = false) {
    if (!recorder_first) {
      for (auto& p : producers_) p->close_stdin();
      recorder_->close_stdin();
    }
    std::string line;
    while (!(line = recorder_->read_line()).empty()) {
      if (source_ != Source::kRun) *out += line + "\n";
    }
    const int status = recorder_->wait();
    for (auto& p : producers_) p->close_stdin();
    for (auto& p : producers_) p->wait();
    if (source_ == Source::kRun) {
      std::ifstream err(file_ + ".err");
      out->assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
    }
    return status;
  }

 private:
  Source source_;
  std::string file_;
  std::vector<std::unique_ptr<ChildProcess>> producers_;
  std::unique_ptr<ChildProcess> recorder_;
  std::vector<pid_t> pids_;
  bool ready_ = true;
};

// The test:rec records of a file, by process: count, checksums, per-thread continuity.
struct ByProcess {
  std::map<uint32_t, uint64_t> records;  // by pid
  uint64_t bad = 0, gaps = 0;
};

ByProcess read_by_process(Trace& trace) {
  ByProcess out;
  const std::vector<ThreadInfo> threads = trace.threads();
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> next;
  auto source = trace.read_all();
  Record r;
  while (source->next(&r)) {
    if (r.event->full_name() != "test:rec" || r.field_count != 4) continue;
    const uint32_t pid = r.thread < threads.size() ? threads[r.thread].pid : 0;
    const uint64_t thread = r.values[0].bits, seq = r.values[1].bits;
    if (r.values[3].bits != testing::producer_checksum(thread, seq, r.values[2].bits)) ++out.bad;
    auto [it, added] = next.emplace(std::make_pair(pid, thread), seq);
    if (it->second != seq) ++out.gaps;
    it->second = seq + 1;
    ++out.records[pid];
  }
  return out;
}

const std::vector<std::string> kBlock = {"NANOTRACE_MODE=block", "NANOTRACE_BLOCK_TIMEOUT=inf",
                                         "NANOTRACE_BUFFER=256K"};

class RecordingLoopTest : public ::testing::TestWithParam<Source> {};

TEST_P(RecordingLoopTest, StopOnEndsRightAfterTheMatchInAnyProcess) {
  const std::string file = testing::temp_path("loop-stop.ntr");
  Recording rec(GetParam(), {"--threads", "1", "--events", "200000"}, kBlock,
                "--stop-on 'test:rec seq==50000'", file);
  ASSERT_TRUE(rec.ready());
  rec.go();
  std::string out;
  ASSERT_TRUE(exited_ok(rec.finish(&out))) << out;
  EXPECT_NE(out.find("stopped on record 50000 (test:rec"), std::string::npos) << out;
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->warning(), "");  // an END chunk: complete
  ByProcess got = read_by_process(*trace);
  EXPECT_EQ(got.bad, 0u);
  EXPECT_EQ(got.gaps, 0u);
  // The process that matched ends with the match; a process is named when several are.
  uint32_t matched = rec.pids()[0];
  const size_t of = out.find(" of process ");
  ASSERT_EQ(of != std::string::npos, GetParam() != Source::kOne) << out;
  if (of != std::string::npos) matched = std::stoul(out.substr(of + 12));
  EXPECT_EQ(got.records[matched], 50001u) << out;
  for (pid_t p : rec.pids()) EXPECT_LE(got.records[p], 200000u);
  if (GetParam() != Source::kRun) {
    EXPECT_NE(out.find("stop-on matched"), std::string::npos) << out;
  }
  // The command ran its course untraced; the segment the run kept for it is gone.
  for (pid_t p : rec.pids()) EXPECT_TRUE(testing::segments_of(p).empty());
}

TEST_P(RecordingLoopTest, SnapshotOnHoldsEveryProcessRecorded) {
  const std::string file = testing::temp_path("loop-snap.ntr");
  Recording rec(GetParam(), {"--threads", "2", "--events", "100000", "--hold"}, kBlock,
                "--snapshot-on 'test:rec thread==0 && seq==50000'", file);
  ASSERT_TRUE(rec.ready());
  rec.go();
  ASSERT_TRUE(rec.each_printed("ready"));
  std::string out;
  ASSERT_TRUE(exited_ok(rec.finish(&out))) << out;
  EXPECT_NE(out.find("snapshot written: " + file + ".snap1"), std::string::npos) << out;
  // The recording is complete; the snapshot holds every process, intact records, none lost.
  auto whole = testing::open_ok(file);
  ASSERT_TRUE(whole);
  ByProcess all = read_by_process(*whole);
  for (pid_t p : rec.pids()) EXPECT_EQ(all.records[p], 200000u) << p;
  auto snap = testing::open_ok(file + ".snap1");
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->processes().size(), rec.pids().size());
  ByProcess in_snap = read_by_process(*snap);
  EXPECT_EQ(in_snap.bad, 0u);
  EXPECT_EQ(in_snap.gaps, 0u);
  // (What each ring holds then is its unconsumed part: block mode, drained as it goes.)
  std::set<uint32_t> pids;
  for (const ProcessInfo& p : snap->processes()) pids.insert(p.pid);
  for (pid_t p : rec.pids()) EXPECT_TRUE(pids.count(static_cast<uint32_t>(p))) << p;
  auto records = snap->read_all();
  Record r;
  while (records->next(&r)) {
  }
  for (const ThreadStats& s : records->threads()) EXPECT_EQ(s.lost(), 0u) << s.info.tid;
}

// The recorder stopped (SIGSTOP) while discard-mode producers write into rings too small to
// hold it all: what the writers dropped is counted, exactly, for every process.
TEST_P(RecordingLoopTest, LossesWhileTheRecorderStoodStillAreCountedExactly) {
  const std::string file = testing::temp_path("loop-loss.ntr");
  const uint64_t kEvents = 100000;
  Recording rec(GetParam(), {"--threads", "1", "--events", std::to_string(kEvents), "--hold"},
                {"NANOTRACE_MODE=discard", "NANOTRACE_BUFFER=64K"}, "", file);
  ASSERT_TRUE(rec.ready());
  kill(rec.recorder(), SIGSTOP);
  rec.go();
  const bool produced = rec.each_printed("ready");
  kill(rec.recorder(), SIGCONT);
  ASSERT_TRUE(produced);
  std::string out;
  ASSERT_TRUE(exited_ok(rec.finish(&out))) << out;
  int code = 0;
  auto stats = nlohmann::json::parse(testing::run_command(kCli + " stats --json " + file, &code));
  ASSERT_EQ(code, 0);
  std::map<uint32_t, uint64_t> lost;  // every thread's (a command's main thread has I/O records)
  for (const auto& t : stats["threads"])
    lost[t["pid"].get<uint32_t>()] += t["lost"].get<uint64_t>();
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  ByProcess got = read_by_process(*trace);
  EXPECT_EQ(got.bad, 0u);
  std::map<uint32_t, uint64_t>& records = got.records;
  uint64_t all_lost = 0;
  for (pid_t p : rec.pids()) {
    EXPECT_GT(lost[p], 0u) << "64 KiB cannot hold " << kEvents << " records";
    EXPECT_EQ(records[p] + lost[p], kEvents) << p;
    all_lost += lost[p];
  }
  // The recorder's own report says the same.
  const std::string said = GetParam() == Source::kRun ? std::to_string(all_lost) + " lost"
                                                      : "total lost " + std::to_string(all_lost);
  EXPECT_NE(out.find(said), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Sources, RecordingLoopTest,
                         ::testing::Values(Source::kOne, Source::kSeveral, Source::kRun),
                         source_name);

// --duration ends a recording of one process and of several alike (`run` records until the
// command exits: it has no --duration).
TEST(RecordingLoopDurationTest, DurationEndsTheRecordingOfOneOrSeveral) {
  for (Source source : {Source::kOne, Source::kSeveral}) {
    SCOPED_TRACE(source == Source::kOne ? "one" : "several");
    const std::string file = testing::temp_path("loop-duration.ntr");
    Recording rec(source, {"--threads", "1", "--forever"}, kBlock, "--duration 0.3", file);
    ASSERT_TRUE(rec.ready());
    rec.go();
    std::string out;
    const int status = rec.finish(&out, /*recorder_first=*/true);  // the producers run on
    ASSERT_TRUE(exited_ok(status)) << out;
    EXPECT_NE(out.find("duration over"), std::string::npos) << out;
    auto trace = testing::open_ok(file);
    ASSERT_TRUE(trace);
    EXPECT_EQ(trace->warning(), "");
    ByProcess got = read_by_process(*trace);
    EXPECT_EQ(got.gaps, 0u);
    for (pid_t p : rec.pids()) EXPECT_GT(got.records[p], 0u);
  }
}

// Progress reports, through the library, until one shows every record made.
class Progress {
 public:
  std::function<void(const RecordProgress&)> callback() {
    return [this](const RecordProgress& p) {
      std::lock_guard<std::mutex> lock(mu_);
      reports_.push_back(p);
    };
  }
  // Waits (at most 60 s, however loaded the machine) for a report of at least n records.
  bool wait_for(uint64_t n) {
    for (int i = 0; i < 6000; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!reports_.empty() && reports_.back().records >= n) return true;
      }
      usleep(10000);
    }
    return false;
  }
  void expect_sane(uint64_t final_records) {
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_FALSE(reports_.empty());
    for (size_t i = 1; i < reports_.size(); ++i) {
      EXPECT_GE(reports_[i].records, reports_[i - 1].records);
      EXPECT_GE(reports_[i].bytes, reports_[i - 1].bytes);
      EXPECT_GT(reports_[i].seconds, reports_[i - 1].seconds);
    }
    EXPECT_LE(reports_.back().records, final_records);
    EXPECT_GT(reports_.back().bytes, 0u);
    EXPECT_EQ(reports_.back().lost, 0u);
  }

 private:
  std::mutex mu_;
  std::vector<RecordProgress> reports_;
};

TEST(RecordingLoopProgressTest, ProgressReachesEveryRecordOfOneOrSeveralProcesses) {
  for (int n : {1, 2}) {
    SCOPED_TRACE(n);
    std::vector<std::unique_ptr<ChildProcess>> producers;
    std::vector<std::string> sources;
    for (int i = 0; i < n; ++i) {
      producers.push_back(std::make_unique<ChildProcess>(
          std::vector<std::string>{kProducer, "--threads", "1", "--events", "30000", "--go",
                                   "--hold"},
          kBlock));
      sources.push_back(std::to_string(testing::read_pid(*producers.back())));
    }
    RecordOptions o;
    o.output = testing::temp_path("loop-progress.ntr");
    Progress progress;
    o.progress = progress.callback();
    Result<RecordSummary> result = Status::Ok();
    std::thread recorder([&] { result = record_processes(sources, o); });
    for (const std::string& s : sources) ASSERT_TRUE(testing::wait_consumer(std::stoi(s)));
    for (auto& p : producers) p->write_line("go");
    for (auto& p : producers) EXPECT_EQ(p->read_line(), "ready");
    const bool reached = progress.wait_for(30000u * n);
    for (auto& p : producers) p->close_stdin();
    recorder.join();
    ASSERT_TRUE(reached);
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result->records, 30000u * n);
    EXPECT_EQ(result->processes.size(), n == 1 ? 0u : 2u);
    progress.expect_sane(result->records);
    std::remove(o.output.c_str());
  }
}

TEST(RecordingLoopProgressTest, ProgressReachesEveryRecordOfACommand) {
  const std::string flag = testing::temp_path("loop-progress-flag");
  RunOptions o;
  o.output = testing::temp_path("loop-progress-run.ntr");
  o.interposer = NANOTRACE_IO_LIB;
  // The producer's records, then a wait (untraced) until the test has seen them reported.
  o.command = {"/bin/sh", "-c",
               "NANOTRACE_BUFFER=4M " + kProducer +
                   " --threads 1 --events 30000 >/dev/null; while [ ! -e " + flag +
                   " ]; do sleep 0.01; done"};
  Progress progress;
  o.progress = progress.callback();
  Result<RunSummary> result = Status::Ok();
  std::thread runner([&] { result = run_command(o); });
  const bool reached = progress.wait_for(30000);
  std::ofstream(flag.c_str()) << "";
  runner.join();
  std::remove(flag.c_str());
  ASSERT_TRUE(reached);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_GE(result->records, 30000u);
  EXPECT_EQ(result->reason, "target exited");
  progress.expect_sane(result->records);
  std::remove(o.output.c_str());
}

// A source of the fleet agent's shape: every process of one run id, found as it starts (none
// at the start), a snapshot asked for from outside, over only when the caller stops it.
class WatchingSource final : public rec::DrainSource {
 public:
  explicit WatchingSource(uint64_t run_id) : run_id_(run_id) {}
  std::vector<const Trace*> initial_processes() const override { return {}; }
  uint32_t file_pid() const override { return static_cast<uint32_t>(getpid()); }
  bool tsc_clock() const override { return sys::tsc_is_invariant(); }
  bool several() const override { return true; }
  bool asks_snapshots() const override { return true; }
  Status start(rec::ProcessSession&) override { return Status::Ok(); }
  Status poll(rec::ProcessSession& session, rec::SourceAsks* asks) override {
    asks->snapshot = snapshot_.exchange(false);
    return session.scan([this](const abi::SegmentHeader& h) { return h.run_id == run_id_; },
                        /*owned=*/false);
  }
  bool ended(const rec::ProcessSession&) override { return false; }
  Status finish(rec::ProcessSession&, file::EndReason) override { return Status::Ok(); }

  std::atomic<bool> snapshot_{false};

 private:
  uint64_t run_id_;
};

TEST(RecordingLoopSourceTest, ProcessesFoundAsTheyStartAndASnapshotAskedFromOutside) {
  uint64_t run_id = 0;
  ASSERT_EQ(getrandom(&run_id, sizeof(run_id), 0), static_cast<ssize_t>(sizeof(run_id)));
  run_id |= 1;
  // Flight-recorder rings (overwrite), large enough that the recording loses nothing.
  std::vector<std::string> env = {"NANOTRACE_MODE=overwrite", "NANOTRACE_BUFFER=4M",
                                  "NANOTRACE_RUN_ID=" + std::to_string(run_id)};
  const std::vector<std::string> args = {kProducer, "--threads", "1",     "--events",
                                         "20000",   "--go",      "--hold"};
  WatchingSource source(run_id);
  RecordOptions o;
  o.output = testing::temp_path("loop-watch.ntr");
  std::atomic<bool> stop{false};
  o.stop = &stop;
  Result<RecordSummary> result = Status::Ok();
  std::thread recorder([&] { result = rec::record_source(source, o); });
  // One process, then another that starts while the recording runs.
  ChildProcess a(args, env);
  const pid_t pa = testing::read_pid(a);
  ASSERT_TRUE(testing::wait_consumer(pa));
  ChildProcess b(args, env);
  const pid_t pb = testing::read_pid(b);
  ASSERT_TRUE(testing::wait_consumer(pb));
  a.write_line("go");
  b.write_line("go");
  EXPECT_EQ(a.read_line(), "ready");
  EXPECT_EQ(b.read_line(), "ready");
  source.snapshot_ = true;
  const std::string snap = o.output + ".snap1";
  for (int i = 0; i < 6000 && ::access(snap.c_str(), F_OK) != 0; ++i) usleep(10000);
  stop = true;
  recorder.join();
  a.close_stdin();
  b.close_stdin();
  a.wait();
  b.wait();
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->reason, "interrupted");
  ASSERT_EQ(result->snapshots, std::vector<std::string>{snap});
  // The recording has every record of both; the snapshot what their rings held.
  for (const std::string& path : {o.output, snap}) {
    SCOPED_TRACE(path);
    auto trace = testing::open_ok(path);
    ASSERT_TRUE(trace);
    EXPECT_EQ(trace->warning(), "");
    ASSERT_EQ(trace->processes().size(), 2u);
    ByProcess got = read_by_process(*trace);
    EXPECT_EQ(got.bad, 0u);
    EXPECT_EQ(got.gaps, 0u);
    for (pid_t p : {pa, pb}) {
      if (path == o.output) {
        EXPECT_EQ(got.records[p], 20000u);
      } else {
        EXPECT_GT(got.records[p], 0u);
      }
    }
  }
  std::remove(o.output.c_str());
  std::remove(snap.c_str());
}

// A malformed --kernel item is one error line before anything is recorded, with every source:
// no file is left, and `run` never runs the command.
TEST(RecordingLoopOptionsTest, MalformedKernelItemLeavesNoFileAndRunsNothing) {
  ChildProcess producer({kProducer, "--threads", "1", "--events", "10", "--hold"}, kBlock);
  const pid_t pid = testing::read_pid(producer);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(producer.read_line(), "ready");
  const std::string file = testing::temp_path("loop-bad-kernel.ntr");
  const std::string flag = testing::temp_path("loop-bad-kernel-ran");
  const std::vector<std::string> commands = {
      kCli + " record " + std::to_string(pid) + " --kernel 'bad!' -o " + file,
      kCli + " record " + std::to_string(pid) + " " + std::to_string(pid) + " --kernel 'bad!' -o " +
          file,
      kCli + " run --kernel 'bad!' -o " + file + " -- touch " + flag};
  for (const std::string& command : commands) {
    SCOPED_TRACE(command);
    int code = 0;
    const std::string out = testing::run_command("timeout 60 " + command + " 2>&1", &code);
    EXPECT_EQ(code, 1) << out;
    EXPECT_EQ(out.rfind("nanotrace: --kernel: ", 0), 0u) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(::access(file.c_str(), F_OK), 0) << "a file was left";
    EXPECT_NE(::access(flag.c_str(), F_OK), 0) << "the command ran";
    auto t = Trace::open_pid(pid);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ((*t)->process().consumer_pid, 0u);
  }
  producer.close_stdin();
  producer.wait();
}

// The pacing every source's recording shares: straight on while a writer waits, a quarter
// ring's time after records moved (at most 10 ms), a back-off from 50 us to 10 ms when idle.
TEST(DrainPacingTest, RestsAsTheRingsFillAndBacksOffWhenIdle) {
  rec::DrainPacing pacing(100.0);
  EXPECT_DOUBLE_EQ(pacing.begin_pass(100.5), 0.5);
  EXPECT_DOUBLE_EQ(pacing.begin_pass(100.75), 0.25);
  EXPECT_EQ(pacing.rest_us(true, /*writer_waiting=*/true, 0.002, 0), 0u);
  EXPECT_EQ(pacing.rest_us(true, false, 0.002, 0.0005), 1500u);
  EXPECT_EQ(pacing.rest_us(true, false, 1.0, 0.001), 9000u);     // capped at 10 ms
  EXPECT_EQ(pacing.rest_us(true, false, 0.00003, 0.00002), 0u);  // under 20 us: go on
  const uint64_t idle[] = {50, 100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000};
  for (uint64_t us : idle) EXPECT_EQ(pacing.rest_us(false, false, 0, 0), us);
  EXPECT_EQ(pacing.rest_us(true, false, 0.002, 0), 2000u);
  EXPECT_EQ(pacing.rest_us(false, false, 0, 0), 50u) << "records moved: the back-off restarts";
}

}  // namespace
}  // namespace nanotrace
