// Who a snapshot says its machine is: the identity a caller names (a fleet agent's node) is
// what the NODE chunk holds, passed explicitly rather than through the process's environment
// (which the agent shares with every thread and every program it starts), and the operator's
// NANOTRACE_NODE_* variables still replace it.
#include "base/node_identity.hpp"

#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "record/snapshot_writer.hpp"
#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;
using testing::kProducer;

// The test's own environment without the operator's NANOTRACE_NODE_* variables, restored
// after the case.
class NodeIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v != nullptr ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value)
        setenv(name, value->c_str(), 1);
      else
        unsetenv(name);
    }
  }
  static constexpr const char* kNames[] = {"NANOTRACE_NODE_NAME", "NANOTRACE_NODE_MACHINE_ID",
                                           "NANOTRACE_NODE_BOOT_ID"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(NodeIdentityTest, ThisMachineByDefaultANamedNodeWhenGivenTheOperatorsVariablesFirst) {
  const sys::NodeIdentity local = sys::node_identity();
  EXPECT_EQ(local.hostname, sys::hostname());
  EXPECT_FALSE(local.hostname.empty());
  EXPECT_EQ(local.boot_id.size(), 36u) << local.boot_id;  // a UUID, without its newline
  EXPECT_EQ(sys::node_identity("agent-node").hostname, "agent-node");
  EXPECT_EQ(sys::node_identity("agent-node").boot_id, local.boot_id);
  setenv("NANOTRACE_NODE_NAME", "operator-node", 1);
  setenv("NANOTRACE_NODE_BOOT_ID", "another-boot", 1);
  EXPECT_EQ(sys::node_identity("agent-node").hostname, "operator-node");
  EXPECT_EQ(sys::node_identity().boot_id, "another-boot");
}

TEST_F(NodeIdentityTest, ASnapshotNamesTheIdentityItWasGivenAndLeavesTheEnvironmentAlone) {
  ChildProcess producer({kProducer, "--threads", "1", "--events", "100", "--hold"}, {});
  const pid_t pid = testing::read_pid(producer);
  ASSERT_EQ(producer.read_line(), "ready");
  auto trace = Trace::open_pid(pid);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const std::string path = testing::temp_path("named-node.ntr");
  const sys::NodeIdentity named{"named-node", "named-machine", "named-boot"};
  auto written =
      rec::write_snapshot_of({trace->get()}, path, /*compress=*/false, nullptr, nullptr, &named);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(std::getenv("NANOTRACE_NODE_NAME"), nullptr);
  auto file = Trace::open_path(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ((*file)->nodes().size(), 1u);
  EXPECT_EQ((*file)->nodes()[0].hostname, "named-node");
  EXPECT_EQ((*file)->nodes()[0].machine_id, "named-machine");
  EXPECT_EQ((*file)->nodes()[0].boot_id, "named-boot");
  unlink(path.c_str());
}

}  // namespace
}  // namespace nanotrace
