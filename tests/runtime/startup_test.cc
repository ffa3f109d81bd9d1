// What a traced program pays to start: the shared runtime carries the parts of the C++
// library it uses and their unwinder, so a program that is not otherwise C++ loads neither
// libstdc++, libm nor libgcc_s;
// and since the runtime then holds a copy of operator new and delete, the process must still
// keep one allocator pair, including a program's own replacement.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>

#include "common/child_process.hpp"

namespace nanotrace {
namespace {

const std::string kBin = NANOTRACE_BIN_DIR;

// The libraries the dynamic loader maps for `program` (what ldd prints).
std::string loaded_objects(const std::string& program) {
  testing::ChildProcess child({program}, {"LD_TRACE_LOADED_OBJECTS=1"});
  std::string all, line;
  while (!(line = child.read_line()).empty()) all += line + "\n";
  EXPECT_EQ(WEXITSTATUS(child.wait()), 0);
  return all;
}

TEST(StartupTest, TracedProgramLoadsNoCxxLibrary) {
  std::string objects = loaded_objects(kBin + "/nanotrace_test_startup_program");
  EXPECT_NE(objects.find("libnanotrace.so"), std::string::npos) << objects;
  EXPECT_NE(objects.find("libc.so"), std::string::npos) << objects;
  EXPECT_EQ(objects.find("libstdc++"), std::string::npos) << objects;
  EXPECT_EQ(objects.find("libm.so"), std::string::npos) << objects;
  EXPECT_EQ(objects.find("libgcc_s"), std::string::npos) << objects;
  // And it runs: its one tracepoint starts the runtime.
  testing::ChildProcess run({kBin + "/nanotrace_test_startup_program"}, {});
  EXPECT_EQ(WEXITSTATUS(run.wait()), 0);
}

TEST(StartupTest, ProgramsOwnOperatorNewServesTheRuntimeToo) {
  testing::ChildProcess child({kBin + "/nanotrace_test_replaced_new_host"}, {});
  std::string line = child.read_line();
  int status = child.wait();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_EQ(line.rfind("ok ", 0), 0u) << line;
  // The runtime's own allocations (its registry, the trigger) went through it as well.
  EXPECT_GT(std::stoul(line.substr(3)), 10u);
}

}  // namespace
}  // namespace nanotrace
