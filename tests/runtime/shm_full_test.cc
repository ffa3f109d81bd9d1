// /dev/shm running full under a traced program: ring memory is allocated a block at a time,
// so the program must neither die of SIGBUS nor lose records silently. The producer runs in
// a private mount namespace whose /dev/shm is a tmpfs with room for the segment's tables and
// a few blocks only; every record it attempted is then either in the segment or counted.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/child_process.hpp"

namespace nanotrace {
namespace {

TEST(ShmFullTest, RingsThatCannotGrowDropAndCountInsteadOfCrashing) {
  const std::string bin = NANOTRACE_BIN_DIR;
  const uint64_t threads = 2, events = 100000;
  std::string script =
      "mount -t tmpfs -o size=400k none /dev/shm || exit 90\n"
      "NANOTRACE_KEEP=1 NANOTRACE_MODE=discard NANOTRACE_BUFFER=1M " +
      bin + "/nanotrace_test_producer --threads " + std::to_string(threads) + " --events " +
      std::to_string(events) +
      " >/dev/null\n"
      "echo \"producer $?\"\n"
      "for seg in /dev/shm/nanotrace-*; do " +
      bin + "/nanotrace stats \"$seg\" --json | tr -d '\\n'; echo; done\n";
  testing::ChildProcess child(
      {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script}, {});
  std::string status_line = child.read_line();
  std::string stats_line = child.read_line();
  int status = child.wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_NE(WEXITSTATUS(status), 90) << "cannot mount a tmpfs in a mount namespace";
  // Exit 0: no SIGBUS (that would be 135), no abort.
  EXPECT_EQ(status_line, "producer 0");
  auto stats = nlohmann::json::parse(stats_line, nullptr, false);
  ASSERT_FALSE(stats.is_discarded()) << stats_line;
  uint64_t records = stats["records"].get<uint64_t>();
  uint64_t lost = stats["lost"].get<uint64_t>();
  // Some blocks fit, the rest of the rings did not: both kinds of outcome happened ...
  EXPECT_GT(records, 0u);
  EXPECT_GT(lost, 0u);
  // ... and every attempted record is accounted for.
  EXPECT_EQ(records + lost, threads * events) << stats_line;
  uint64_t dropped = 0;
  for (const auto& t : stats["threads"]) dropped += t["dropped"].get<uint64_t>();
  EXPECT_EQ(dropped, lost);
}

}  // namespace
}  // namespace nanotrace
