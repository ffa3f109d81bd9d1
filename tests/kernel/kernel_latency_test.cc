// `nanotrace latency` on kernel events, against the real kernel (root, tracefs): iograph on a
// loop device recorded with --kernel block,io_uring, then io_uring submit -> complete by
// user_data and block issue -> complete by dev+sector, paired across CPUs. The pairs are
// checked against `dump --json` of the same events: the same counts, and each latency equal
// to its end's time minus its begin's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/child_process.hpp"
#include "kernel/kernel_fixture.hpp"

namespace nanotrace {
namespace {

using nlohmann::json;
using testing::run_command;

using namespace kernel_test;  // NOLINT: the shared helpers

// One rule paired the way the documentation says: a begin opens its key (replacing an open
// one, which ends unmatched), the next end of that key from any CPU closes it.
struct Expected {
  uint64_t begins = 0, ends = 0, unmatched_ends = 0;
  std::map<std::pair<uint64_t, std::string>, uint64_t> latency;  // (begin ns, key) -> ns
  std::map<std::pair<uint64_t, std::string>, uint64_t> task;     // (begin ns, key) -> its tid
};

std::string key_of(const json& fields, const std::vector<std::string>& key) {
  std::string out;
  for (const std::string& k : key) {
    if (!out.empty()) out += "+";
    out += std::to_string(fields[k].get<uint64_t>());
  }
  return out;
}

Expected pair_dump(const std::string& dump, const std::string& begin, const std::string& end,
                   const std::vector<std::string>& key) {
  Expected e;
  std::map<std::string, std::pair<uint64_t, uint64_t>> open;  // key -> begin ns, task
  std::istringstream lines(dump);
  std::string line;
  while (std::getline(lines, line)) {
    // Most lines are user-space records: parsing them all took minutes under ASan.
    if (line.find(begin) == std::string::npos && line.find(end) == std::string::npos) continue;
    json r = json::parse(line);
    if (!r.contains("kernel")) continue;
    const std::string event = r["event"];
    const uint64_t t = r["time_ns"];
    if (event == begin) {
      ++e.begins;
      open[key_of(r["fields"], key)] = {t, r["tid"].get<uint64_t>()};
    } else if (event == end) {
      ++e.ends;
      auto it = open.find(key_of(r["fields"], key));
      if (it == open.end()) {
        ++e.unmatched_ends;
        continue;
      }
      e.latency[{it->second.first, it->first}] = t - it->second.first;
      e.task[{it->second.first, it->first}] = it->second.second;
      open.erase(it);
    }
  }
  return e;
}

TEST(KernelTest, LatencyPairsKernelEventsAcrossCpusAsDumpShowsThem) {
  SKIP_WITHOUT_KERNEL_TRACING();
  const std::string file = temp_file("latency");
  {
    LoopWorkload w("block", 150);
    ASSERT_TRUE(w.ready());
    int code = 0;
    std::string out = w.record("--kernel block,io_uring", file, &code);
    ASSERT_EQ(code, 0) << out;
    EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  }
  int code = 0;
  const std::string dump = run_command(kCli + " dump --json " + file, &code);
  ASSERT_EQ(code, 0);
  json stats = json::parse(run_command(kCli + " stats --json " + file, &code));
  ASSERT_EQ(code, 0);

  struct Rule {
    std::string begin, end, key;
    std::vector<std::string> fields;
  };
  const Rule rules[] = {
      {"io_uring:io_uring_submit_req", "io_uring:io_uring_complete", "user_data", {"user_data"}},
      {"block:block_rq_issue", "block:block_rq_complete", "dev+sector", {"dev", "sector"}}};
  for (const Rule& rule : rules) {
    SCOPED_TRACE(rule.begin);
    const Expected want = pair_dump(dump, rule.begin, rule.end, rule.fields);
    ASSERT_GE(want.latency.size(), 100u);
    std::string out = run_command(kCli + " latency " + file + " --begin " + rule.begin + " --end " +
                                      rule.end + " --key " + rule.key + " --top 100000000 --json",
                                  &code);
    ASSERT_EQ(code, 0) << out;
    json j = json::parse(out);
    EXPECT_EQ(j["begins"], want.begins);
    EXPECT_EQ(j["ends"], want.ends);
    EXPECT_EQ(j["unmatched_ends"], want.unmatched_ends);
    EXPECT_EQ(j["overall"]["count"], want.latency.size());
    ASSERT_EQ(j["top"].size(), want.latency.size());
    size_t checked = 0;
    for (const json& p : j["top"]) {
      auto it = want.latency.find({p["begin_ns"].get<uint64_t>(), p["key"].get<std::string>()});
      ASSERT_NE(it, want.latency.end()) << p.dump();
      EXPECT_EQ(p["latency_ns"], it->second) << p.dump();
      // The slowest pairs name the task the begin record ran in, as dump does.
      EXPECT_EQ(p["tid"], want.task.at(it->first)) << p.dump();
      ++checked;
    }
    EXPECT_EQ(checked, want.latency.size());
    // Kernel losses beside the user ones: what `stats` counts for the CPUs.
    uint64_t kernel_lost = 0;
    for (const json& t : stats["threads"]) {
      // The CPUs' rows: thread id 0, named cpuN.
      if (t["tid"] == 0 && t["name"].get<std::string>().rfind("cpu", 0) == 0) {
        kernel_lost += t["overwritten"].get<uint64_t>() + t["dropped"].get<uint64_t>();
      }
    }
    EXPECT_EQ(j["kernel_lost"], kernel_lost);
    EXPECT_TRUE(j.contains("lost"));

    out = run_command(kCli + " latency " + file + " --begin " + rule.begin + " --end " + rule.end +
                          " --key " + rule.key,
                      &code);
    ASSERT_EQ(code, 0) << out;
    EXPECT_NE(out.find(std::to_string(want.latency.size()) + " pairs"), std::string::npos) << out;
  }

  // A key field the kernel event lacks: one clear line naming the event's fields.
  std::string out = run_command(kCli + " latency " + file +
                                    " --begin block:block_rq_issue --end block:block_rq_complete"
                                    " --key dev+nosuch 2>&1",
                                &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("has no field 'nosuch'"), std::string::npos) << out;
  ::unlink(file.c_str());
}

}  // namespace
}  // namespace nanotrace
