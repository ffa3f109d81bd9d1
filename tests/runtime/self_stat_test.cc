// The control thread's /proc/self/stat reader keeps one descriptor that the program may close
// and reuse at any moment (a daemon closing every descriptor it did not open). A number the
// program took must be left alone, never read as our file nor closed.
#include "runtime/self_stat.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

namespace nanotrace::runtime {
namespace {

// The descriptors that name this process's stat file (the runtime's control thread, which
// runs in this test too, holds one of its own).
std::set<int> stat_descriptors() {
  const std::string target = "/proc/" + std::to_string(getpid()) + "/stat";
  std::set<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(entry.path(), ec) == target) {
      out.insert(std::atoi(entry.path().filename().c_str()));
    }
  }
  return out;
}

// Reads once, and returns the descriptor the reader opened for it (-1 if none).
int read_and_find(SelfStat* stat, SelfStat::Reading* r) {
  const std::set<int> before = stat_descriptors();
  if (!stat->read(r)) return -1;
  for (int fd : stat_descriptors()) {
    if (before.count(fd) == 0) return fd;
  }
  return -1;
}

TEST(SelfStatTest, ReadsThisProcesssThreadsAndMainThreadState) {
  SelfStat stat;
  SelfStat::Reading r;
  ASSERT_TRUE(stat.read(&r));
  EXPECT_GE(r.threads, 1);
  EXPECT_EQ(r.main_state, 'R');  // this thread is the main one, and it is running
  stat.close_if_ours();
}

TEST(SelfStatTest, ANumberTheProgramTookIsNeitherReadNorClosed) {
  SelfStat stat;
  SelfStat::Reading r;
  const int ours = read_and_find(&stat, &r);
  ASSERT_GE(ours, 0);

  // The program closes every descriptor and puts a file of its own on our number.
  ASSERT_EQ(::close(ours), 0);
  char path[] = "/tmp/self_stat_test.XXXXXX";
  const int file = mkstemp(path);
  ::unlink(path);
  int program = file;  // the lowest free number: ours unless a lower one was free
  if (file != ours) {
    program = dup2(file, ours);
    ::close(file);
  }
  ASSERT_EQ(program, ours);
  ASSERT_EQ(::write(program, "data", 4), 4);

  SelfStat::Reading again;
  ASSERT_TRUE(stat.read(&again));  // from a fresh descriptor of its own
  EXPECT_EQ(again.threads, r.threads);
  // The program's file is open, untouched, at its offset.
  struct stat st;
  ASSERT_EQ(fstat(program, &st), 0) << "the reader closed the program's descriptor";
  EXPECT_EQ(st.st_size, 4);
  EXPECT_EQ(lseek(program, 0, SEEK_CUR), 4);
  stat.close_if_ours();
  EXPECT_EQ(fstat(program, &st), 0) << "close_if_ours closed the program's descriptor";
  ::close(program);
}

// The same with the file swapped between two readings by dup2, the way a daemon puts its log
// on a fixed number: the reader must not parse the program's bytes as its own.
TEST(SelfStatTest, AFileDupedOntoTheNumberIsNotTakenForOurs) {
  SelfStat stat;
  SelfStat::Reading r;
  const int ours = read_and_find(&stat, &r);
  ASSERT_GE(ours, 0);
  char path[] = "/tmp/self_stat_test.XXXXXX";
  const int file = mkstemp(path);
  ::unlink(path);
  // A line that parses as a one-thread process: taken for ours, it would end the process.
  const std::string fake =
      std::to_string(getpid()) + " (x) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 0 0 0\n";
  ASSERT_EQ(::write(file, fake.data(), fake.size()), static_cast<ssize_t>(fake.size()));
  ASSERT_EQ(dup2(file, ours), ours);
  SelfStat::Reading again;
  ASSERT_TRUE(stat.read(&again));
  EXPECT_EQ(again.threads, r.threads);
  struct stat st;
  EXPECT_EQ(fstat(ours, &st), 0) << "the reader closed the program's descriptor";
  stat.close_if_ours();
  EXPECT_EQ(fstat(ours, &st), 0);
  ::close(ours);
  ::close(file);
}

TEST(SelfStatTest, OnlyTheCallerIsLeftWhenTheMainThreadIsAZombie) {
  EXPECT_TRUE(SelfStat::only_caller_left({1, 'R'}));
  EXPECT_TRUE(SelfStat::only_caller_left({2, 'Z'}));
  EXPECT_FALSE(SelfStat::only_caller_left({2, 'S'}));
  EXPECT_FALSE(SelfStat::only_caller_left({3, 'Z'}));
  EXPECT_FALSE(SelfStat::only_caller_left({0, '?'}));
}

}  // namespace
}  // namespace nanotrace::runtime
