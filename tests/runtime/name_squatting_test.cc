// Someone else holding a traced process's segment name (/dev/shm/nanotrace-<pid>) before the
// process starts tracing: a symlink planted to make the runtime write elsewhere, or another
// user's file. The runtime must follow neither, touch neither, and trace under another
// name that the tools still find.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/child_process.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

const std::string kProducer = std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer";

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Lets `squat` occupy the segment name of a process that is about to become the producer
// (a shell waiting to exec it: the runtime creates its segment as the program loads), then
// lets it trace; returns the records the tools read from its segment.
uint64_t trace_despite(void (*squat)(const std::string& name), std::string* segment) {
  testing::ChildProcess child(
      {"/bin/sh", "-c", "read go; exec " + kProducer + " --events 1000 --hold"}, {});
  pid_t pid = child.pid();
  squat(testing::segment_of(pid));
  child.write_line("go");
  EXPECT_EQ(child.read_line(), "pid " + std::to_string(pid));
  EXPECT_EQ(child.read_line(), "ready");
  uint64_t records = 0;
  auto trace = Trace::open_pid(pid);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  if (trace.ok()) {
    auto source = (*trace)->read_all();
    Record r;
    while (source->next(&r)) ++records;
  }
  for (const std::string& s : testing::segments_of(pid)) {
    if (s == testing::segment_of(pid)) continue;
    *segment = s;
    struct stat st;
    EXPECT_EQ(lstat(s.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode)) << s;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << s;
  }
  child.close_stdin();
  child.wait();
  return records;
}

const std::string kVictim = "/tmp/nanotrace-squat-victim";

TEST(NameSquattingTest, PlantedSymlinkIsNotFollowed) {
  static std::string planted;
  { std::ofstream(kVictim) << "precious\n"; }
  std::string segment;
  uint64_t records = trace_despite(
      [](const std::string& name) {
        ASSERT_EQ(symlink(kVictim.c_str(), name.c_str()), 0);
        planted = name;
      },
      &segment);
  EXPECT_EQ(records, 1000u);
  EXPECT_NE(segment, "");  // traced under an alternative name
  EXPECT_EQ(contents(kVictim), "precious\n");
  struct stat st;
  ASSERT_EQ(stat(kVictim.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 9);
  unlink(kVictim.c_str());
  unlink(planted.c_str());
}

TEST(NameSquattingTest, AnotherUsersFileIsLeftAlone) {
  std::string segment;
  static std::string squatted;
  uint64_t records = trace_despite(
      [](const std::string& name) {
        int fd = ::open(name.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(::write(fd, "not yours\n", 10), 10);
        ::close(fd);
        ASSERT_EQ(chown(name.c_str(), 65534, 65534), 0);  // nobody
        squatted = name;
      },
      &segment);
  EXPECT_EQ(records, 1000u);
  EXPECT_NE(segment, "");
  EXPECT_EQ(contents(squatted), "not yours\n");
  struct stat st;
  ASSERT_EQ(stat(squatted.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  unlink(squatted.c_str());
}

}  // namespace
}  // namespace nanotrace
