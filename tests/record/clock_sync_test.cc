// A node's clock-sync quality, as its daemon states it, recorded beside the trace: the
// parsers on the daemons' own output formats, and a real chronyd (started on a command socket
// of the test's own, not steering the system clock) read into a snapshot's NODE chunk and into
// the error bound `nanotrace merge` reports.
#include "record/clock_sync.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using nlohmann::json;
using testing::ChildProcess;
using testing::kCli;
using testing::kProducer;

// `chronyc -c -n tracking` of chrony 4.3 (Debian 12): a local reference, then an NTP server.
constexpr const char* kChronyLocal =
    "7F7F0101,,8,1796300967.975459544,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,"
    "0.000000000,0.000000000,0.0,Normal\n";
constexpr const char* kChronyServer =
    "C0A80001,192.168.0.1,3,1796300967.975459544,-0.000012345,0.000003000,0.000020000,-12.500,"
    "0.010,0.200,0.004000000,0.000500000,64.5,Normal\n";
constexpr const char* kChronyUnsynced =
    "00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,"
    "1.000000000,1.000000000,0.0,Not synchronised\n";
// `pmc -u -b 0 'GET TIME_STATUS_NP'` of linuxptp 3.1.
constexpr const char* kPmc =
    "sending: GET TIME_STATUS_NP\n"
    "\t90e2ba.fffe.20c7f8-0 seq 0 RESPONSE MANAGEMENT TIME_STATUS_NP \n"
    "\t\tmaster_offset              -37\n"
    "\t\tingress_time               1415289925536233765\n"
    "\t\tcumulativeScaledRateOffset +0.000000000\n"
    "\t\tscaledLastGmPhaseChange    0\n"
    "\t\tgmTimeBaseIndicator        0\n"
    "\t\tlastGmPhaseChange          0x0000'0000000000000000.0000\n"
    "\t\tgmPresent                  true\n"
    "\t\tgmIdentity                 00b058.feef.0b448a\n";

TEST(ClockSyncTest, ChronyTrackingGivesItsOwnBound) {
  auto s = rec::parse_chrony_tracking(kChronyServer);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->source, file::SyncSource::kChrony);
  EXPECT_TRUE(s->synchronised);
  EXPECT_EQ(s->offset_ns, -12345);
  EXPECT_EQ(s->root_delay_ns, 4000000u);
  EXPECT_EQ(s->root_dispersion_ns, 500000u);
  EXPECT_EQ(s->reference, "192.168.0.1");
  // |offset| + root dispersion + root delay / 2.
  EXPECT_EQ(s->bound_ns, 12345u + 500000u + 2000000u);
  auto local = rec::parse_chrony_tracking(kChronyLocal);
  ASSERT_TRUE(local);
  EXPECT_TRUE(local->synchronised);
  EXPECT_EQ(local->bound_ns, 0u);
  auto unsynced = rec::parse_chrony_tracking(kChronyUnsynced);
  ASSERT_TRUE(unsynced);
  EXPECT_FALSE(unsynced->synchronised);
  EXPECT_EQ(unsynced->bound_ns, file::kUnknownBound);
  for (const char* bad : {"", "506 Cannot talk to daemon\n", "1,2,3\n",
                          "C0A80001,x,3,1,abc,0,0,0,0,0,0.004,0.0005,64,Normal\n",
                          "C0A80001,x,3,1,0,0,0,0,0,0,-0.004,0.0005,64,Normal\n"}) {
    EXPECT_FALSE(rec::parse_chrony_tracking(bad)) << bad;
  }
}

TEST(ClockSyncTest, PtpMasterOffset) {
  auto s = rec::parse_pmc_time_status(kPmc);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->source, file::SyncSource::kPtp);
  EXPECT_TRUE(s->synchronised);
  EXPECT_EQ(s->offset_ns, -37);
  EXPECT_EQ(s->bound_ns, 37u);
  std::string no_gm = kPmc;
  no_gm.replace(no_gm.find("gmPresent                  true"), 35,
                "gmPresent                  false\n");
  auto lost = rec::parse_pmc_time_status(no_gm);
  ASSERT_TRUE(lost);
  EXPECT_FALSE(lost->synchronised);
  EXPECT_EQ(lost->bound_ns, file::kUnknownBound);
  EXPECT_FALSE(rec::parse_pmc_time_status("sending: GET TIME_STATUS_NP\n"));
}

// chronyd in the foreground on a command socket in a private directory, with a local
// reference (stratum 8) and without control of the system clock (-x).
class Chronyd {
 public:
  Chronyd() : dir_(testing::temp_path("chrony")) {
    mkdir(dir_.c_str(), 0700);
    std::string conf = "local stratum 8\ncmdport 0\nbindcmdaddress " + socket() + "\npidfile " +
                       dir_ + "/chronyd.pid\ndriftfile " + dir_ + "/drift\n";
    FILE* f = fopen((dir_ + "/chrony.conf").c_str(), "w");
    fputs(conf.c_str(), f);
    fclose(f);
    child_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/chronyd", "-x", "-u", "root", "-d", "-l", dir_ + "/log",
                                 "-f", dir_ + "/chrony.conf"},
        std::vector<std::string>{});
    for (int i = 0; i < 500 && !answers(); ++i) usleep(10000);
  }
  ~Chronyd() {
    child_.reset();  // SIGKILL, reaped
    int code = 0;
    testing::run_command("rm -rf " + dir_, &code);
  }
  std::string socket() const { return dir_ + "/chronyd.sock"; }
  bool answers() const {
    int code = 0;
    testing::run_command("chronyc -h " + socket() + " -c -n tracking >/dev/null 2>&1", &code);
    return code == 0;
  }

 private:
  std::string dir_;
  std::unique_ptr<ChildProcess> child_;
};

TEST(ClockSyncTest, ARealChronydIsRecordedAndBoundsTheMerge) {
  if (access("/usr/sbin/chronyd", X_OK) != 0) GTEST_SKIP() << "chrony is not installed";
  Chronyd chronyd;
  ASSERT_TRUE(chronyd.answers()) << "chronyd did not start";
  ChildProcess producer({kProducer, "--threads", "1", "--events", "200", "--hold"}, {});
  const pid_t pid = testing::read_pid(producer);
  ASSERT_EQ(producer.read_line(), "ready");
  const std::string env = "NANOTRACE_CHRONY_SOCKET=" + chronyd.socket() + " ";
  std::string a = testing::temp_path("chrony-a.ntr"), b = testing::temp_path("chrony-b.ntr");
  std::string merged = testing::temp_path("chrony-merged.ntr");
  int code = 0;
  testing::run_command(env + "NANOTRACE_NODE_NAME=a " + kCli + " snapshot " + std::to_string(pid) +
                           " -o " + a + " >/dev/null 2>&1",
                       &code);
  ASSERT_EQ(code, 0);
  testing::run_command(env + "NANOTRACE_NODE_NAME=b NANOTRACE_NODE_BOOT_ID=other " + kCli +
                           " snapshot " + std::to_string(pid) + " -o " + b + " >/dev/null 2>&1",
                       &code);
  ASSERT_EQ(code, 0);
  auto trace = testing::open_ok(a);
  ASSERT_TRUE(trace);
  const NodeInfo& n = trace->nodes().at(0);
  EXPECT_EQ(n.sync_source, "chrony");
  EXPECT_TRUE(n.synchronised);
  ASSERT_NE(n.sync_bound_ns, kUnknownErrorBound);
  // A local reference: chrony's bound is its root dispersion, which grows from 0 slowly.
  EXPECT_LT(n.sync_bound_ns, 1000000u);
  json stats = json::parse(testing::run_command(kCli + " stats --json " + a, &code));
  EXPECT_EQ(stats["nodes"][0]["clock_sync"]["source"], "chrony");

  // Both bounds known: the realtime-aligned node's bound is its pairs' error plus both.
  json m = json::parse(
      testing::run_command(kCli + " merge --json " + a + " " + b + " -o " + merged, &code));
  ASSERT_EQ(code, 0);
  const json& far = m["nodes"][1];
  ASSERT_EQ(far["alignment"], "realtime");
  ASSERT_FALSE(far["error_bound_ns"].is_null());
  auto other = testing::open_ok(b);
  ASSERT_TRUE(other);
  EXPECT_EQ(
      far["error_bound_ns"].get<uint64_t>(),
      far["pair_error_ns"].get<uint64_t>() + n.sync_bound_ns + other->nodes().at(0).sync_bound_ns);
  producer.close_stdin();
  producer.wait();
  for (const std::string& f : {a, b, merged}) unlink(f.c_str());
}

}  // namespace
}  // namespace nanotrace
