// Every exporter on a real trace of several processes: a shell script running dd and cp under
// `nanotrace run` (the I/O interposer records each process into one trace file). Each format
// must put every process's threads and records under that process: Chrome JSON read with
// nlohmann-json, Perfetto decoded field by field, CTF read by the real babeltrace2, CSV, JSON
// lines and the text dump. The expected processes, threads and record counts come from
// `nanotrace stats --json` of the same file.
#include "export_fixture.hpp"
#include "protobuf_decode.hpp"

namespace nanotrace_export_test {
namespace {

using Thread = std::pair<uint64_t, uint64_t>;  // pid, tid

class MultiProcessExportTest : public ::testing::Test {
 protected:
  // One trace for the whole suite: recording it is the slow part.
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/nanotrace-procs-export-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    const std::string& d = *dir_;
    // The shell's redirection is I/O of its own: all three processes have records.
    Proc r = run(kCli + " run -o " + d + "/t.ntr -- sh -c 'dd if=/dev/zero of=" + d +
                 "/x bs=4k count=10 status=none 2>/dev/null; cp " + d + "/x " + d + "/y'");
    ASSERT_EQ(r.code, 0) << r.err;
    Proc s = run(kCli + " stats --json " + d + "/t.ntr");
    ASSERT_EQ(s.code, 0) << s.err;
    stats_ = new json(json::parse(s.out));
    Proc m = run(kCli + " summary --json " + d + "/t.ntr");
    ASSERT_EQ(m.code, 0) << m.err;
    summary_ = new json(json::parse(m.out));
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    delete stats_;
    delete summary_;
    dir_ = nullptr;
    stats_ = nullptr;
    summary_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(stats_, nullptr);
    ASSERT_NE(summary_, nullptr);
    ASSERT_EQ((*stats_)["lost"], 0);
    for (const json& t : (*stats_)["threads"]) {
      uint64_t pid = t["pid"], tid = t["tid"];
      threads_.insert({pid, tid});
      if (t["records"].get<uint64_t>() > 0) {
        records_by_pid_[pid] += t["records"].get<uint64_t>();
        threads_with_records_.insert({pid, tid});
      }
      total_ += t["records"].get<uint64_t>();
    }
    // Every process of the trace, with or without records.
    for (const json& p : (*summary_)["processes"]) names_by_pid_[p["pid"]] = p["name"];
    // sh, dd and cp: three processes (two if the shell execs cp), dd's and cp's among them.
    ASSERT_EQ((*summary_)["processes"].size(), (*stats_)["processes"].get<size_t>());
    ASSERT_GE(records_by_pid_.size(), 2u) << stats_->dump();
    std::set<std::string> names;
    for (const auto& [pid, name] : names_by_pid_) names.insert(name);
    ASSERT_TRUE(names.count("dd") && names.count("cp")) << summary_->dump();
  }

  static std::string trace() { return *dir_ + "/t.ntr"; }
  static std::string out(const std::string& name) { return *dir_ + "/" + name; }

  static std::string* dir_;
  static json* stats_;    // stats --json: threads and their records
  static json* summary_;  // summary --json: the processes
  std::set<Thread> threads_;
  std::set<Thread> threads_with_records_;
  std::map<uint64_t, uint64_t> records_by_pid_;
  std::map<uint64_t, std::string> names_by_pid_;
  uint64_t total_ = 0;
};

std::string* MultiProcessExportTest::dir_ = nullptr;
json* MultiProcessExportTest::stats_ = nullptr;
json* MultiProcessExportTest::summary_ = nullptr;

TEST_F(MultiProcessExportTest, ChromeJsonPutsEachThreadUnderItsProcess) {
  Proc e = run(kCli + " export " + trace() + " -f chrome -o " + out("t.json"));
  ASSERT_EQ(e.code, 0) << e.err;
  json doc = json::parse(read_file(out("t.json")));
  std::map<uint64_t, std::string> process_names;
  std::set<Thread> named_threads;
  std::map<uint64_t, uint64_t> records;
  for (const json& ev : doc["traceEvents"]) {
    uint64_t pid = ev["pid"], tid = ev["tid"];
    if (ev["ph"] == "M" && ev["name"] == "process_name") {
      EXPECT_EQ(tid, pid);
      process_names[pid] = ev["args"]["name"];
    } else if (ev["ph"] == "M") {
      ASSERT_EQ(ev["name"], "thread_name");
      named_threads.insert({pid, tid});
    } else {
      EXPECT_TRUE(threads_.count({pid, tid})) << ev.dump();
      ++records[pid];
    }
  }
  EXPECT_EQ(process_names, names_by_pid_);
  EXPECT_EQ(named_threads, threads_);
  EXPECT_EQ(records, records_by_pid_);
}

TEST_F(MultiProcessExportTest, PerfettoHasAProcessTrackPerProcessOnOneClock) {
  Proc e = run(kCli + " export " + trace() + " -f perfetto -o " + out("t.pftrace"));
  ASSERT_EQ(e.code, 0) << e.err;
  std::vector<Field> packets;
  ASSERT_TRUE(decode(read_file(out("t.pftrace")), &packets));
  ASSERT_FALSE(packets.empty());

  // The first packet declares the clock: MONOTONIC for the sequence and as the trace's
  // primary clock, with a snapshot of REALTIME and MONOTONIC.
  std::vector<Field> first;
  ASSERT_TRUE(decode(packets[0].bytes, &first));
  const Field* defaults = find(first, 59);
  ASSERT_NE(defaults, nullptr);
  std::vector<Field> d;
  ASSERT_TRUE(decode(defaults->bytes, &d));
  ASSERT_NE(find(d, 58), nullptr);
  EXPECT_EQ(find(d, 58)->varint, 3u);
  const Field* snapshot = find(first, 6);
  ASSERT_NE(snapshot, nullptr);
  std::vector<Field> snap;
  ASSERT_TRUE(decode(snapshot->bytes, &snap));
  ASSERT_NE(find(snap, 2), nullptr);
  EXPECT_EQ(find(snap, 2)->varint, 3u);
  std::map<uint64_t, uint64_t> clocks;
  for (const Field& f : snap) {
    if (f.number != 1) continue;
    std::vector<Field> c;
    ASSERT_TRUE(decode(f.bytes, &c));
    clocks[find(c, 1)->varint] = find(c, 2)->varint;
  }
  ASSERT_TRUE(clocks.count(1) && clocks.count(3));

  std::map<uint64_t, uint64_t> process_track_pid;      // process track uuid -> pid
  std::map<uint64_t, std::string> process_track_name;  // -> name
  std::map<uint64_t, Thread> thread_track;             // thread track uuid -> pid, tid
  std::map<uint64_t, uint64_t> thread_parent;          // thread track uuid -> parent uuid
  std::map<uint64_t, uint64_t> records;
  uint64_t last_ts = 0;
  for (const Field& p : packets) {
    std::vector<Field> pf;
    ASSERT_TRUE(decode(p.bytes, &pf));
    if (const Field* td = find(pf, 60)) {
      std::vector<Field> desc;
      ASSERT_TRUE(decode(td->bytes, &desc));
      uint64_t uuid = find(desc, 1)->varint;
      if (const Field* pd = find(desc, 3)) {
        std::vector<Field> f;
        ASSERT_TRUE(decode(pd->bytes, &f));
        process_track_pid[uuid] = find(f, 1)->varint;
        process_track_name[uuid] = find(f, 6)->bytes;
      } else if (const Field* th = find(desc, 4)) {
        std::vector<Field> f;
        ASSERT_TRUE(decode(th->bytes, &f));
        thread_track[uuid] = {find(f, 1)->varint, find(f, 2)->varint};
        ASSERT_NE(find(desc, 5), nullptr);
        thread_parent[uuid] = find(desc, 5)->varint;
      }
      continue;
    }
    const Field* te = find(pf, 11);
    if (!te) continue;
    // One clock: records of every process merged by time, none before the start.
    uint64_t ts = find(pf, 8)->varint;
    EXPECT_GE(ts, clocks[3]);
    EXPECT_GE(ts, last_ts);
    last_ts = ts;
    std::vector<Field> ev;
    ASSERT_TRUE(decode(te->bytes, &ev));
    uint64_t track = find(ev, 11)->varint;
    ASSERT_TRUE(thread_track.count(track)) << track;
    ++records[thread_track[track].first];
  }
  std::map<uint64_t, std::string> names;
  for (const auto& [uuid, pid] : process_track_pid) names[pid] = process_track_name[uuid];
  EXPECT_EQ(names, names_by_pid_);
  EXPECT_EQ(process_track_pid.size(), (*stats_)["processes"].get<size_t>());
  std::set<Thread> threads;
  for (const auto& [uuid, thread] : thread_track) {
    threads.insert(thread);
    // Under its own process's track.
    ASSERT_TRUE(process_track_pid.count(thread_parent[uuid]));
    EXPECT_EQ(process_track_pid[thread_parent[uuid]], thread.first);
  }
  EXPECT_EQ(threads, threads_);
  EXPECT_EQ(records, records_by_pid_);
}

// With --slice, each process's slices are on lanes of its own: the lane tracks are children
// of the begin record's process track.
TEST_F(MultiProcessExportTest, PerfettoSliceLanesBelongToTheBeginRecordsProcess) {
  Proc e = run(kCli + " export " + trace() + " -f perfetto -o " + out("slices.pftrace") +
               " --slice io_open:open_begin,io_open:open_end,call");
  ASSERT_EQ(e.code, 0) << e.err;
  std::map<uint64_t, uint64_t> begins_wanted;  // pid -> open_begin records
  Proc d = run(kCli + " dump --json " + trace());
  ASSERT_EQ(d.code, 0) << d.err;
  for (const std::string& line : lines(d.out)) {
    json r = json::parse(line);
    if (r["event"] == "io_open:open_begin") ++begins_wanted[r["pid"].get<uint64_t>()];
  }
  ASSERT_GE(begins_wanted.size(), 2u);
  std::vector<Field> packets;
  ASSERT_TRUE(decode(read_file(out("slices.pftrace")), &packets));
  std::map<uint64_t, uint64_t> process_track_pid;
  std::map<uint64_t, uint64_t> lane_pid;  // lane track uuid -> its process's pid
  std::map<uint64_t, uint64_t> begins;    // pid -> BEGIN events on its lanes
  std::map<uint64_t, int> depth;
  for (const Field& p : packets) {
    std::vector<Field> pf;
    ASSERT_TRUE(decode(p.bytes, &pf));
    if (const Field* td = find(pf, 60)) {
      std::vector<Field> desc;
      ASSERT_TRUE(decode(td->bytes, &desc));
      uint64_t uuid = find(desc, 1)->varint;
      if (const Field* pd = find(desc, 3)) {
        std::vector<Field> f;
        ASSERT_TRUE(decode(pd->bytes, &f));
        process_track_pid[uuid] = find(f, 1)->varint;
      } else if (!find(desc, 4)) {  // a lane: named, no thread
        ASSERT_NE(find(desc, 5), nullptr);
        ASSERT_TRUE(process_track_pid.count(find(desc, 5)->varint));
        lane_pid[uuid] = process_track_pid[find(desc, 5)->varint];
      }
      continue;
    }
    const Field* te = find(pf, 11);
    if (!te) continue;
    std::vector<Field> ev;
    ASSERT_TRUE(decode(te->bytes, &ev));
    uint64_t type = find(ev, 9)->varint, track = find(ev, 11)->varint;
    if (type == 3) continue;
    ASSERT_TRUE(lane_pid.count(track)) << track;
    if (type == 1) ++begins[lane_pid[track]];
    depth[track] += type == 1 ? 1 : -1;
    ASSERT_TRUE(depth[track] == 0 || depth[track] == 1) << "slices on one lane must not overlap";
  }
  EXPECT_EQ(begins, begins_wanted);
}

// babeltrace2 reads the per-process CTF traces of the directory, merges them by time and
// names each event's process from its trace's env: "[TIME] (+DELTA) HOST:PROC:(PID) EVENT:
// { tid = T }, { FIELDS }".
TEST_F(MultiProcessExportTest, CtfIsOneTracePerProcessThatBabeltraceNames) {
  const std::string ctf = out("ctf");
  Proc e = run(kCli + " export " + trace() + " -f ctf -o " + ctf);
  ASSERT_EQ(e.code, 0) << e.err;
  size_t traces = 0;
  for (const auto& entry : fs::directory_iterator(ctf)) {
    ASSERT_TRUE(entry.is_directory()) << entry.path();
    EXPECT_TRUE(fs::exists(entry.path() / "metadata"));
    ++traces;
  }
  EXPECT_EQ(traces, records_by_pid_.size());  // each process that has records

  Proc bt = run("babeltrace2 " + ctf);
  ASSERT_EQ(bt.code, 0) << bt.err;
  static const std::regex kLine(
      R"(^\[[^\]]+\] \(\+[^)]*\) [^:\s]+:([^:\s]+):\((\d+)\) (\S+): \{ tid = (\d+) \}.*$)");
  std::map<uint64_t, uint64_t> records;
  std::map<uint64_t, std::string> names;
  std::set<Thread> threads;
  for (const std::string& line : lines(bt.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, kLine)) << line;
    uint64_t pid = std::stoull(m[2]);
    ++records[pid];
    names[pid] = m[1];
    threads.insert({pid, std::stoull(m[4])});
  }
  EXPECT_EQ(records, records_by_pid_);
  for (const auto& [pid, name] : names) EXPECT_EQ(name, names_by_pid_[pid]) << pid;
  EXPECT_EQ(threads, threads_with_records_);

  // Exported again over itself: the old process directories are replaced, not added to.
  e = run(kCli + " export " + trace() + " -f ctf -o " + ctf);
  ASSERT_EQ(e.code, 0) << e.err;
  Proc again = run("babeltrace2 " + ctf);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(lines(again.out).size(), total_);
}

TEST_F(MultiProcessExportTest, CsvJsonLinesAndDumpCarryEachRecordsPid) {
  Proc c = run(kCli + " export " + trace() + " -f csv -o -");
  ASSERT_EQ(c.code, 0) << c.err;
  std::vector<std::string> rows = lines(c.out);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].rfind("time_ns,pid,tid,thread,seq,event,", 0), 0u) << rows[0];
  std::map<uint64_t, uint64_t> csv;
  for (size_t i = 1; i < rows.size(); ++i) {
    std::vector<std::string> cells;
    std::stringstream ss(rows[i]);
    for (std::string cell; cells.size() < 3 && std::getline(ss, cell, ',');) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 3u) << rows[i];
    uint64_t pid = std::stoull(cells[1]);
    EXPECT_TRUE(threads_.count({pid, std::stoull(cells[2])})) << rows[i];
    ++csv[pid];
  }
  EXPECT_EQ(csv, records_by_pid_);

  Proc j = run(kCli + " export " + trace() + " -f jsonl -o -");
  ASSERT_EQ(j.code, 0) << j.err;
  std::map<uint64_t, uint64_t> jsonl;
  for (const std::string& line : lines(j.out)) {
    json r = json::parse(line);
    uint64_t pid = r["pid"], tid = r["tid"];
    EXPECT_TRUE(threads_.count({pid, tid})) << line;
    // One clock from the first process's start, which every record follows: none is clamped.
    EXPECT_GT(r["time_ns"].get<uint64_t>(), 0u) << line;
    ++jsonl[pid];
  }
  EXPECT_EQ(jsonl, records_by_pid_);

  // dump: TIME PID TID THREAD EVENT FIELDS.
  Proc t = run(kCli + " dump " + trace());
  ASSERT_EQ(t.code, 0) << t.err;
  std::map<uint64_t, uint64_t> dump;
  for (const std::string& line : lines(t.out)) {
    std::stringstream ss(line);
    uint64_t time = 0, pid = 0, tid = 0;
    ASSERT_TRUE(ss >> time >> pid >> tid) << line;
    EXPECT_TRUE(threads_.count({pid, tid})) << line;
    ++dump[pid];
  }
  EXPECT_EQ(dump, records_by_pid_);
}

}  // namespace
}  // namespace nanotrace_export_test
