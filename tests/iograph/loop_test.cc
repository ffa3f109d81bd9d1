// The loop target: setup, a run, and cleanup of the device and the backing file, also when
// setup fails after the device was bound. Skipped without root or /dev/loop-control.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "common/prerequisite.hpp"
#include "iograph/executor.hpp"
#include "iograph/generator.hpp"

namespace iograph {
namespace {

#define SKIP_WITHOUT_LOOP()                                             \
  do {                                                                  \
    NANOTRACE_REQUIRE(::geteuid() == 0, "the loop target needs root");  \
    NANOTRACE_REQUIRE(::access("/dev/loop-control", F_OK) == 0,         \
                      "/dev/loop-control is missing (no loop driver)"); \
  } while (0)

// Loop devices whose backing file path contains `name` (the kernel keeps the path, with
// " (deleted)" once unlinked), found through sysfs like `losetup -j`.
std::vector<std::string> devices_backed_by(const std::string& name) {
  std::vector<std::string> out;
  DIR* dir = ::opendir("/sys/block");
  if (!dir) return out;
  while (dirent* entry = ::readdir(dir)) {
    std::string dev = entry->d_name;
    if (dev.rfind("loop", 0) != 0) continue;
    std::ifstream in("/sys/block/" + dev + "/loop/backing_file");
    std::string path;
    if (std::getline(in, path) && path.find(name) != std::string::npos) out.push_back(dev);
  }
  ::closedir(dir);
  return out;
}

// The kernel may finish an autoclear detach shortly after the last close.
std::vector<std::string> devices_backed_by_settled(const std::string& name) {
  for (int i = 0; i < 200; ++i) {
    if (devices_backed_by(name).empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return devices_backed_by(name);
}

TEST(LoopTargetTest, FailureAfterBindRemovesDeviceAndFile) {
  SKIP_WITHOUT_LOOP();
  std::string device, backing;
  TargetOptions options;
  options.loop_bytes = 4 << 20;
  options.loop_after_bind = [&](const std::string& d, const std::string& b) {
    device = d;
    backing = b;
    EXPECT_EQ(devices_backed_by(b).size(), 1u) << "bound while setting up";
    return Status::IoError("simulated failure after setup");
  };
  Result<std::unique_ptr<Target>> target = open_target("loop", options);
  ASSERT_FALSE(target.ok());
  EXPECT_EQ(target.status().message(), "simulated failure after setup");
  ASSERT_FALSE(backing.empty());
  EXPECT_NE(::access(backing.c_str(), F_OK), 0) << backing << " still exists";
  EXPECT_TRUE(devices_backed_by_settled(backing).empty()) << device << " still bound";
}

TEST(LoopTargetTest, RunsReadsAndCleansUpOnDestruction) {
  SKIP_WITHOUT_LOOP();
  std::string backing;
  TargetOptions options;
  options.loop_bytes = 4 << 20;
  options.loop_after_bind = [&](const std::string&, const std::string& b) {
    backing = b;
    return Status::Ok();
  };
  {
    Result<std::unique_ptr<Target>> target = open_target("loop", options);
    ASSERT_TRUE(target.ok()) << target.status().message();
    EXPECT_EQ(::access(backing.c_str(), F_OK), -1) << "the file is unlinked once bound";
    EXPECT_EQ(devices_backed_by(backing).size(), 1u);
    EXPECT_TRUE((*target)->direct_io());
    for (Backend backend :
         {Backend::kSync, Backend::kUringReady, Backend::kUringLevel, Backend::kUringLink}) {
      auto executor = make_executor(backend, **target, ExecOptions{});
      ASSERT_TRUE(executor.ok());
      GenOptions gen;
      gen.nodes = 64;
      Result<Graph> graph = generate(parse_shape("graph(2,16)").value(), gen);
      ASSERT_TRUE(graph.ok());
      RunResult result;
      ASSERT_TRUE((*executor)->run(*graph, result).ok());
      EXPECT_EQ(result.ok_count, 64u) << backend_name(backend);
      for (const NodeRecord& r : result.nodes) EXPECT_EQ(r.result, 4096);
    }
  }
  EXPECT_TRUE(devices_backed_by_settled(backing).empty());
}

}  // namespace
}  // namespace iograph
