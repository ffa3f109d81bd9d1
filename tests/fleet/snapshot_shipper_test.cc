// The agent's snapshot shipper (src/fleet/snapshot_shipper.hpp) where no ClickHouse answers:
// a closed port (attempts fail, are counted and retried, the queue is kept, nothing is marked
// or changed), a server that accepts and never answers (stop() still returns: the attempt is
// cancelled), the spool's snapshots queued at start unless a marker names the same target,
// and files that are not traces dropped. Shipping into a real server is
// tests/fleet/fleet_ship_test.sh's.
#include "fleet/snapshot_shipper.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "record/record_helpers.hpp"  // tests/record

namespace nanotrace::fleet {
namespace {

using std::chrono::steady_clock;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Polls until done() (at most 60 s: far beyond the few attempts the cases wait for).
bool wait_until(const std::function<bool()>& done) {
  const auto deadline = steady_clock::now() + std::chrono::seconds(60);
  while (steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A TCP socket on 127.0.0.1 that listens (the kernel completes connections) and never answers.
struct SilentServer {
  int fd = -1;
  int port = 0;
  SilentServer() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd, 8) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
  }
  ~SilentServer() { close(fd); }
};

// A port nothing listens on: bound, then closed.
int closed_port() {
  int port = SilentServer().port;
  return port;
}

class SnapshotShipperTest : public ::testing::Test {
 protected:
  // One real snapshot (`nanotrace snapshot` of a producer's 200 records), copied per case.
  static void SetUpTestSuite() {
    snapshot_ = testing::temp_path("shipper-snapshot.nt");
    testing::ChildProcess producer(
        {testing::kProducer, "--threads", "1", "--events", "200", "--hold"}, {});
    const pid_t pid = testing::read_pid(producer);
    if (pid <= 0 || producer.read_line() != "ready") return;
    int code = 0;
    testing::run_command(testing::kCli + " snapshot " + std::to_string(pid) + " -o " + snapshot_ +
                             " >/dev/null 2>&1",
                         &code);
    producer.close_stdin();
    producer.wait();
    if (code != 0) unlink(snapshot_.c_str());
  }
  static void TearDownTestSuite() { unlink(snapshot_.c_str()); }

  void SetUp() override {
    ASSERT_TRUE(exists(snapshot_)) << "no snapshot of the test producer";
    char tmpl[] = "/tmp/nanotrace-shipper-test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    spool_ = dir_ + "/spool";
    ASSERT_EQ(mkdir(spool_.c_str(), 0700), 0);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string add_snapshot(const std::string& name) {
    const std::string path = spool_ + "/" + name;
    std::ofstream(path, std::ios::binary) << slurp(snapshot_);
    chmod(path.c_str(), 0600);
    return path;
  }

  static SnapshotShipperOptions options(int port) {
    SnapshotShipperOptions o;
    o.servers = {"http://127.0.0.1:" + std::to_string(port)};
    o.retry_min_ns = o.retry_max_ns = 100'000'000;  // attempts every 0.1 s
    return o;
  }

  std::unique_ptr<SnapshotShipper> start(const SnapshotShipperOptions& o) {
    auto s = SnapshotShipper::start(spool_, o, [this](const std::string& line) {
      std::lock_guard lock(log_mu_);
      log_ += line + "\n";
    });
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }

  static inline std::string snapshot_;
  std::string dir_, spool_;
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(SnapshotShipperTest, AServerDownIsRetriedAndTheQueueKept) {
  const std::string a = add_snapshot("r1.node.1.nt");
  const std::string original = slurp(a);
  auto shipper = start(options(closed_port()));
  ASSERT_TRUE(shipper);
  ASSERT_TRUE(wait_until([&] { return shipper->health().failures >= 3; }));
  ShipHealth h = shipper->health();
  EXPECT_EQ(h.queued, 1u);  // the snapshot of the spool, still queued after three attempts
  EXPECT_EQ(h.shipped, 0u);
  EXPECT_EQ(h.rejected, 0u);
  EXPECT_NE(h.last_error.find("127.0.0.1"), std::string::npos) << h.last_error;
  EXPECT_GT(h.last_error_realtime_ns, 0u);
  EXPECT_EQ(h.last_success_realtime_ns, 0u);
  // Another snapshot while the server is down joins the queue.
  add_snapshot("r2.node.1.nt");
  shipper->enqueue({"r2.node.1.nt"});
  ASSERT_TRUE(wait_until([&] { return shipper->health().failures >= 6; }));
  EXPECT_EQ(shipper->health().queued, 2u);
  shipper->stop();
  EXPECT_EQ(slurp(a), original);  // never changed
  EXPECT_FALSE(exists(a + ".shipped"));
  EXPECT_FALSE(exists(spool_ + "/r2.node.1.nt.shipped"));
  EXPECT_NE(log_.find("(retried)"), std::string::npos) << log_;
}

TEST_F(SnapshotShipperTest, StopEndsAnAttemptThatAServerNeverAnswers) {
  add_snapshot("r1.node.1.nt");
  SilentServer server;
  ASSERT_GT(server.port, 0);
  auto shipper = start(options(server.port));
  ASSERT_TRUE(shipper);
  // The shipper's connection, accepted, then left without an answer.
  const int connection = accept(server.fd, nullptr, nullptr);
  ASSERT_GE(connection, 0);
  const auto before = steady_clock::now();
  shipper->stop();
  const auto took = steady_clock::now() - before;
  close(connection);
  // libcurl's own limit on a silent connection is 60 s; the cancellation takes about a second.
  EXPECT_LT(took, std::chrono::seconds(20));
  EXPECT_EQ(shipper->health().shipped, 0u);
  EXPECT_FALSE(exists(spool_ + "/r1.node.1.nt.shipped"));
}

TEST_F(SnapshotShipperTest, QueuesAtStartWhatIsNotShippedToThisTarget) {
  const SnapshotShipperOptions o = options(closed_port());
  auto here = SnapshotShipper::target(o);
  ASSERT_TRUE(here.ok()) << here.status().message();
  SnapshotShipperOptions elsewhere = o;
  elsewhere.database = "other";
  add_snapshot("r1.node.1.nt");  // shipped here
  add_snapshot("r2.node.1.nt");  // shipped to another database
  add_snapshot("r3.node.1.nt");  // not shipped
  std::ofstream(spool_ + "/r1.node.1.nt.shipped")
      << nlohmann::json{{"target", nlohmann::json::parse(*here)}}.dump();
  std::ofstream(spool_ + "/r2.node.1.nt.shipped") << nlohmann::json{
      {"target", nlohmann::json::parse(*SnapshotShipper::target(
                     elsewhere))}}.dump();
  std::ofstream(spool_ + "/r1.node.json") << "{}";
  auto shipper = start(o);
  ASSERT_TRUE(shipper);
  ASSERT_TRUE(wait_until([&] { return shipper->health().failures >= 1; }));
  EXPECT_EQ(shipper->health().queued, 2u);
  shipper->stop();
  EXPECT_NE(log_.find("2 snapshots of the spool not shipped yet: queued"), std::string::npos)
      << log_;
}

TEST_F(SnapshotShipperTest, DropsFilesThatAreNotTraces) {
  std::ofstream(spool_ + "/junk.node.1.nt") << "not a trace";
  ASSERT_EQ(symlink(snapshot_.c_str(), (spool_ + "/link.node.1.nt").c_str()), 0);
  auto shipper = start(options(closed_port()));
  ASSERT_TRUE(shipper);
  ASSERT_TRUE(wait_until([&] { return shipper->health().rejected == 2; }));
  ShipHealth h = shipper->health();
  EXPECT_EQ(h.queued, 0u);
  EXPECT_EQ(h.failures, 0u);  // never an attempt to send: no retry could ship them
  shipper->stop();
  EXPECT_EQ(slurp(spool_ + "/junk.node.1.nt"), "not a trace");
  EXPECT_FALSE(exists(spool_ + "/junk.node.1.nt.shipped"));
}

TEST_F(SnapshotShipperTest, RefusesBadOptions) {
  SnapshotShipperOptions o;
  EXPECT_FALSE(SnapshotShipper::start(spool_, o, [](const std::string&) {}).ok());
  o.servers = {"ftp://127.0.0.1:1"};
  auto s = SnapshotShipper::start(spool_, o, [](const std::string&) {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--ship-clickhouse"), std::string::npos);
  o.servers = {"http://127.0.0.1:1"};
  o.database = "";
  EXPECT_FALSE(SnapshotShipper::start(spool_, o, [](const std::string&) {}).ok());
}

}  // namespace
}  // namespace nanotrace::fleet
