// The shared set-up of the export and analysis tests: the real nanotrace CLI run on real
// traced processes (storage_sim and export_helper, segments kept with NANOTRACE_KEEP=1), each
// test in its own temporary directory. No timing assertions.
#pragma once

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nanotrace/nanotrace.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace_export_test {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

inline const std::string kCli = NANOTRACE_BIN_DIR "/nanotrace";

struct Proc {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command; captures stdout and stderr.
inline Proc run(const std::string& cmd) {
  char tmpl[] = "/tmp/nanotrace-export-test-XXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  Proc r;
  FILE* p = popen((cmd + " 2>" + tmpl).c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(tmpl);
  unlink(tmpl);
  return r;
}

inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// A traced process run to completion with its segment kept; removed at destruction.
class Traced {
 public:
  explicit Traced(const std::string& command_line, const std::string& env = "") {
    Proc r = run("NANOTRACE_KEEP=1 " + env + " " + command_line);
    EXPECT_EQ(r.code, 0) << r.err;
    std::smatch m;
    static const std::regex kSegment("segment (\\S+)");
    if (std::regex_search(r.out, m, kSegment)) path_ = m[1];
    EXPECT_FALSE(path_.empty()) << r.out;
  }
  ~Traced() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("nanotrace-export-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::vector<json> dump_json(const std::string& source) {
    Proc r = run(kCli + " dump --json " + source);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<json> out;
    for (const std::string& l : lines(r.out)) out.push_back(json::parse(l));
    return out;
  }

  fs::path dir_;
};

// Per-thread loss of a segment, by tid, as the reader counts it.
inline std::map<uint32_t, uint64_t> loss_by_tid(const std::string& source) {
  std::map<uint32_t, uint64_t> out;
  auto trace = nanotrace::Trace::open(source);
  EXPECT_TRUE(trace.ok());
  if (!trace.ok()) return out;
  auto src = (*trace)->read_all();
  nanotrace::Record r;
  while (src->next(&r)) {
  }
  for (const auto& t : src->threads()) out[t.info.tid] += t.lost();
  return out;
}

}  // namespace nanotrace_export_test
