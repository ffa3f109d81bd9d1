// A program traced without `run`'s interposer may close the segment's descriptor behind the
// runtime's back and put a file of its own on the number (a daemon closing every descriptor
// it did not open). The runtime must never allocate ring memory in that file nor close it,
// and must go on: the process still listed alive (its writer lock held) and every record
// written after read or counted as lost.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/child_process.hpp"
#include "common/records.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

const std::string kHelper = std::string(NANOTRACE_BIN_DIR) + "/nanotrace_descriptor_closer";

TEST(DescriptorSafetyTest, ATakenSegmentDescriptorIsNeitherWrittenNorClosedAndIsTakenBack) {
  char dir[] = "/tmp/nanotrace-descriptor-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  constexpr int kThreads = 8;
  constexpr uint64_t kRecords = 10000;  // 6-7 blocks of a 1 MiB ring each, allocated as needed
  testing::ChildProcess helper({kHelper, dir, std::to_string(kThreads), std::to_string(kRecords)},
                               {"NANOTRACE_KEEP=1"});
  std::istringstream first(helper.read_line());
  std::string word;
  pid_t pid = -1;
  first >> word >> pid;
  ASSERT_EQ(word, "pid");
  struct Cleanup {
    pid_t pid;
    std::string dir;
    ~Cleanup() {
      for (const std::string& s : testing::segments_of(pid)) unlink(s.c_str());
      std::filesystem::remove_all(dir);
    }
  } cleanup{pid, dir};

  EXPECT_EQ(helper.read_line(), "file 4 4")
      << "the runtime allocated ring memory in the program's own file";
  ASSERT_EQ(helper.read_line(), "ready");
  std::ifstream own(std::string(dir) + "/own-file");
  std::string content((std::istreambuf_iterator<char>(own)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(content == "mine") << "the program's file holds " << content.size() << " bytes";

  auto trace = Trace::open_pid(pid);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE((*trace)->process().alive) << "the segment's writer lock went with the descriptor";
  testing::ReadResult r = testing::read_test_records(**trace);
  EXPECT_EQ(r.bad_checksums, 0u);
  uint64_t lost = 0;
  for (const ThreadStats& s : r.threads) lost += s.lost();
  EXPECT_EQ(r.records.size() + lost, 1 + kThreads * kRecords);
  EXPECT_GT(r.records.size(), kThreads * kRecords / 2);
  helper.close_stdin();
  const int status = helper.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace nanotrace
