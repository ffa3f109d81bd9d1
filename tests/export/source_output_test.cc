// Bad sources and safe outputs, through the real CLI: a FIFO, directory or device as SOURCE
// fails at once with one clear line (a FIFO used to hang every command); negative -n and
// --duration are refused; no output may be the file being read (directly, through a symlink
// or a hard link), and the source stays untouched; every output file is created 0600
// whatever the umask, and a symlink planted at the output path is replaced, not followed.
#include <sys/stat.h>
#include <sys/types.h>

#include <nanotrace/control.hpp>

#include "export_fixture.hpp"

namespace nanotrace_export_test {
namespace {

class SourceOutputTest : public ExportTest {
 protected:
  void SetUp() override {
    ExportTest::SetUp();
    helper_ = std::make_unique<Traced>(NANOTRACE_BIN_DIR "/text_helper");
    segment_ = helper_->path();
    trace_file_ = path("trace.ntr");
    Proc r = run(kCli + " recover " + segment_ + " -o " + trace_file_);
    ASSERT_EQ(r.code, 0) << r.err;
  }

  // Runs the CLI with a time limit; expects a one-line "nanotrace: " error naming `why`.
  void expect_refused(const std::string& args, const std::string& why) {
    Proc r = run("timeout 30 " + kCli + " " + args);
    EXPECT_NE(r.code, 124) << args << ": hung";
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(lines(r.err).size(), 1u) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("nanotrace: ", 0), 0u) << args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(why)) << args;
  }

  static mode_t mode_of(const std::string& p) {
    struct stat st;
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    return st.st_mode;
  }

  std::unique_ptr<Traced> helper_;
  std::string segment_;
  std::string trace_file_;
};

TEST_F(SourceOutputTest, FifoDirectoryAndDeviceSourcesFailAtOnce) {
  std::string fifo = path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string dir = path("dir");
  fs::create_directories(dir);
  std::string out = path("out");
  const std::vector<std::pair<std::string, std::string>> sources = {
      {fifo, "is a FIFO"}, {dir, "is a directory"}, {"/dev/null", "is a character device"}};
  for (const auto& [source, why] : sources) {
    for (const std::string& command :
         {"dump " + source, "dump --json " + source, "stats --json " + source, "events " + source,
          "status " + source, "export " + source + " -f jsonl -o " + out,
          "export " + source + " -f ctf -o " + out + "-ctf",
          "latency " + source + " --begin a:b --end a:c --key k", "report " + source + " -o " + out,
          "recover " + source + " -o " + out, "snapshot " + source + " -o " + out,
          "record " + source + " -o " + out, "enable " + source + " all"}) {
      expect_refused(command, why);
    }
  }
  EXPECT_FALSE(fs::exists(out));
  // A FIFO among the segments does not hang `list` either.
  std::string squatter = "/dev/shm/nanotrace-" + std::to_string(4190000 + getpid() % 4000);
  ASSERT_EQ(mkfifo(squatter.c_str(), 0600), 0);
  Proc list = run("timeout 30 " + kCli + " list --json");
  unlink(squatter.c_str());
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_TRUE(json::parse(list.out).is_array());
}

TEST_F(SourceOutputTest, NegativeCountsAndDurationsAreRefused) {
  expect_refused("dump " + trace_file_ + " -n -5", "-n/--limit");
  Proc ok = run(kCli + " dump " + trace_file_ + " -n 2");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(lines(ok.out).size(), 2u);
  NANOTRACE(source_test, live, "x={}", 1);  // this process is the live source
  std::string out = path("rec.ntr");
  expect_refused("record " + std::to_string(getpid()) + " --duration -5 -o " + out, "--duration");
  expect_refused("record " + std::to_string(getpid()) + " --duration=-0.5 -o " + out, "--duration");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(SourceOutputTest, OutputsNeverOverwriteTheirSource) {
  const std::string original = read_file(trace_file_);
  std::string link = path("link.ntr"), hard = path("hard.ntr");
  ASSERT_EQ(symlink(trace_file_.c_str(), link.c_str()), 0);
  ASSERT_EQ(::link(trace_file_.c_str(), hard.c_str()), 0);
  for (const std::string& out : {trace_file_, link, hard}) {
    for (const char* format : {"jsonl", "csv", "chrome", "perfetto"}) {
      expect_refused("export " + trace_file_ + " -f " + std::string(format) + " -o " + out,
                     "is the source");
    }
    expect_refused("report " + trace_file_ + " -o " + out, "is the source");
  }
  // A CTF directory whose old files include the source.
  std::string ctf = path("ctf");
  fs::create_directories(ctf);
  ASSERT_EQ(::link(trace_file_.c_str(), (ctf + "/metadata").c_str()), 0);
  expect_refused("export " + trace_file_ + " -f ctf -o " + ctf, "is the source");
  EXPECT_EQ(read_file(trace_file_), original);
  EXPECT_EQ(mode_of(link) & S_IFMT, static_cast<mode_t>(S_IFLNK));

  // A dead process's segment recovered onto itself.
  // (A segment is a large sparse file: unchanged size, mtime and ctime say it was not written.)
  struct stat before, after;
  ASSERT_EQ(stat(segment_.c_str(), &before), 0);
  expect_refused("recover " + segment_ + " -o " + segment_, "is the source");
  ASSERT_EQ(stat(segment_.c_str(), &after), 0);
  EXPECT_EQ(after.st_size, before.st_size);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
  EXPECT_EQ(after.st_ino, before.st_ino);

  // A live process's own segment (this test process) as the output of snapshot and record:
  // it would be truncated under the process (SIGBUS).
  NANOTRACE(source_test, live, "x={}", 2);
  std::string own = nanotrace::segment_path();
  ASSERT_FALSE(own.empty());
  expect_refused("snapshot " + std::to_string(getpid()) + " -o " + own, "is the source");
  expect_refused("record " + std::to_string(getpid()) + " --duration 1 -o " + own, "is the source");
  NANOTRACE(source_test, live, "x={}", 3);  // still alive, still tracing
  Proc dump = run(kCli + " dump " + std::to_string(getpid()) + " -e source_test:live");
  EXPECT_EQ(dump.code, 0) << dump.err;
  EXPECT_THAT(dump.out, HasSubstr("x=3"));
}

TEST_F(SourceOutputTest, OutputFilesAreCreated0600WhateverTheUmask) {
  mode_t old = umask(0);
  NANOTRACE(source_test, live, "x={}", 4);
  std::vector<std::string> files;
  auto expect_created = [&](const std::string& args, const std::string& out) {
    Proc r = run("timeout 60 " + kCli + " " + args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    files.push_back(out);
  };
  for (const char* format : {"jsonl", "csv", "chrome", "perfetto"}) {
    std::string out = path(std::string("t.") + format);
    // An older file with a wider mode is replaced, not reused.
    std::ofstream(out) << "old";
    chmod(out.c_str(), 0644);
    expect_created("export " + trace_file_ + " -f " + std::string(format) + " -o " + out, out);
  }
  std::string ctf = path("ctf");
  expect_created("export " + trace_file_ + " -f ctf -o " + ctf, ctf + "/metadata");
  for (const auto& entry : fs::directory_iterator(ctf)) files.push_back(entry.path().string());
  EXPECT_EQ(mode_of(ctf) & 0777, 0700u);
  expect_created("report " + trace_file_ + " -o " + path("r.html"), path("r.html"));
  expect_created("recover " + segment_ + " -o " + path("rec.ntr"), path("rec.ntr"));
  std::string pid = std::to_string(getpid());
  expect_created("snapshot " + pid + " -o " + path("snap.ntr"), path("snap.ntr"));
  expect_created("record " + pid + " --duration 0.2 -o " + path("live.ntr"), path("live.ntr"));
  umask(old);
  ASSERT_GE(files.size(), 10u);
  for (const std::string& f : files) {
    EXPECT_TRUE(S_ISREG(mode_of(f))) << f;
    EXPECT_EQ(mode_of(f) & 07777, 0600u) << f;
  }
}

TEST_F(SourceOutputTest, PlantedSymlinkIsReplacedNotFollowed) {
  std::string victim = path("victim");
  std::ofstream(victim) << "precious";
  chmod(victim.c_str(), 0644);
  for (const char* format : {"jsonl", "chrome", "perfetto", "csv"}) {
    std::string out = path(std::string("planted.") + format);
    ASSERT_EQ(symlink(victim.c_str(), out.c_str()), 0);
    Proc r = run(kCli + " export " + trace_file_ + " -f " + format + " -o " + out);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(S_ISREG(mode_of(out))) << out;
    EXPECT_EQ(mode_of(out) & 0777, 0600u);
  }
  std::string out = path("planted.ntr");
  ASSERT_EQ(symlink(victim.c_str(), out.c_str()), 0);
  EXPECT_EQ(run(kCli + " recover " + segment_ + " -o " + out).code, 0);
  EXPECT_TRUE(S_ISREG(mode_of(out)));
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_EQ(mode_of(victim) & 0777, 0644u);
  // A symlinked CTF directory is refused: the old CTF files in it would be removed.
  std::string target = path("elsewhere");
  fs::create_directories(target);
  std::ofstream(target + "/metadata") << "keep";
  ASSERT_EQ(symlink(target.c_str(), path("ctf-link").c_str()), 0);
  expect_refused("export " + trace_file_ + " -f ctf -o " + path("ctf-link"), "symbolic link");
  EXPECT_EQ(read_file(target + "/metadata"), "keep");
  // Character devices and pipes are written as streams.
  EXPECT_EQ(run(kCli + " export " + trace_file_ + " -f chrome -o /dev/null").code, 0);
  Proc piped = run(kCli + " export " + trace_file_ + " -f jsonl -o /dev/stdout | wc -l");
  EXPECT_EQ(piped.code, 0);
  EXPECT_EQ(std::stoi(piped.out), 9);
}

}  // namespace
}  // namespace nanotrace_export_test
