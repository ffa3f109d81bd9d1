// The fleet's guards, without a broker: the spool refuses every name that could lead outside
// it and creates files 0600 (never through a link, never over a file); credentials are refused
// when others may read them or they hold nothing usable; broker messages that are malformed
// or name a bad round are refused.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "fleet/agent_announcer.hpp"
#include "fleet/clock_watch.hpp"
#include "fleet/credentials.hpp"
#include "fleet/local_processes.hpp"
#include "fleet/protocol.hpp"
#include "fleet/seen_rounds.hpp"
#include "fleet/spool.hpp"

namespace nanotrace::fleet {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/nanotrace-fleet-unit.XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path).c_str()); }
};

void write(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

TEST(SpoolTest, RefusesNamesOutsideIt) {
  for (const char* bad : {"../x", "/etc/passwd", "a/b", ".hidden", "..", "", "a b", "x\n"}) {
    EXPECT_FALSE(valid_spool_name(bad)) << bad;
  }
  EXPECT_TRUE(valid_spool_name("20261203T121501.123456-node3.node3.42.nt"));
  TempDir d;
  auto spool = Spool::open(d.path + "/spool");
  ASSERT_TRUE(spool.ok()) << spool.status().message();
  EXPECT_FALSE(spool->read("../../etc/passwd", 0, 100).ok());
  EXPECT_NE(spool->read("../../etc/passwd", 0, 100).status().message().find("refused"),
            std::string::npos);
  EXPECT_FALSE(spool->write_file("../escape", "x").ok());
  EXPECT_FALSE(spool->new_path("/tmp/x").ok());
}

TEST(SpoolTest, CreatesPrivateFilesNeverThroughALink) {
  TempDir d;
  auto spool = Spool::open(d.path + "/spool");
  ASSERT_TRUE(spool.ok());
  struct stat st {};
  ASSERT_EQ(stat((d.path + "/spool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_TRUE(spool->write_file("a.json", "{}").ok());
  ASSERT_EQ(stat((d.path + "/spool/a.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(spool->write_file("a.json", "again").ok());  // never over an existing file
  ASSERT_TRUE(spool->replace_file("a.json", "[1]").ok());
  ASSERT_EQ(stat((d.path + "/spool/a.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*spool->read("a.json", 0, 100), "[1]");
  // A link planted in the spool is neither followed for reading nor for writing.
  write(d.path + "/secret", "secret", 0600);
  ASSERT_EQ(symlink((d.path + "/secret").c_str(), (d.path + "/spool/link.nt").c_str()), 0);
  EXPECT_FALSE(spool->read("link.nt", 0, 100).ok());
  EXPECT_FALSE(spool->write_file("link.nt", "x").ok());
  EXPECT_FALSE(spool->new_path("link.nt").ok());
  // The spool itself may not be a link.
  ASSERT_EQ(symlink(d.path.c_str(), (d.path + "/spool-link").c_str()), 0);
  EXPECT_FALSE(Spool::open(d.path + "/spool-link").ok());
}

TEST(SpoolTest, RefusesAFifoWithoutBlockingAndStillServesFiles) {
  TempDir d;
  auto spool = Spool::open(d.path + "/spool");
  ASSERT_TRUE(spool.ok());
  // No writer ever opens it: a blocking open would hold the caller (the agent's fetches) for
  // good. The refusal names what the file is.
  ASSERT_EQ(mkfifo((d.path + "/spool/r.n.1.nt").c_str(), 0600), 0);
  auto r = spool->read("r.n.1.nt", 0, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("r.n.1.nt is not a regular file (a FIFO)"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(spool->size("r.n.1.nt").ok());
  ASSERT_EQ(mkdir((d.path + "/spool/dir.json").c_str(), 0700), 0);
  EXPECT_NE(spool->read("dir.json", 0, 100).status().message().find("(a directory)"),
            std::string::npos);
  ASSERT_TRUE(spool->write_file("ok.json", "{}").ok());
  auto ok = spool->read("ok.json", 0, 100);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, "{}");
}

TEST(CredentialsTest, OnlyAPrivateFileWithATokenOrAUserAndPassword) {
  TempDir d;
  const std::string path = d.path + "/creds";
  write(path, "# fleet\nuser = nt\npassword = pw\n", 0600);
  auto c = read_credentials(path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->user, "nt");
  EXPECT_EQ(c->password, "pw");
  write(path, "token=abc\n", 0600);
  ASSERT_TRUE(read_credentials(path).ok());
  EXPECT_EQ(read_credentials(path)->token, "abc");
  chmod(path.c_str(), 0640);
  EXPECT_FALSE(read_credentials(path).ok());
  EXPECT_NE(read_credentials(path).status().message().find("chmod 600"), std::string::npos);
  write(path, "user = nt\n", 0600);
  EXPECT_FALSE(read_credentials(path).ok());  // no password
  write(path, "secret: x\n", 0600);
  EXPECT_FALSE(read_credentials(path).ok());  // malformed
  write(path, "tokn = x\n", 0600);
  EXPECT_FALSE(read_credentials(path).ok());  // unknown key
  EXPECT_EQ(read_credentials(d.path + "/none").status().code(), StatusCode::kNotFound);
  ASSERT_EQ(symlink(path.c_str(), (d.path + "/link").c_str()), 0);
  EXPECT_FALSE(read_credentials(d.path + "/link").ok());
}

TEST(CredentialsTest, ValuesAreTakenAsWrittenHashesAndQuotesIncluded) {
  // A '#' inside a value is part of it: the server has the whole password, so must we.
  auto c = parse_credentials("user = nt\npassword = s3cret#with-a-hash # not a comment\n", "t");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->password, "s3cret#with-a-hash # not a comment");
  c = parse_credentials("  # a comment line\n\t#another\ntoken=#abc#\n", "t");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->token, "#abc#");
  // Quotes keep blanks at the ends; "..." escapes \" and \\, '...' nothing.
  c = parse_credentials("user = \" a b \"\npassword = \"q\\\"\\\\#\"\n", "t");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->user, " a b ");
  EXPECT_EQ(c->password, "q\"\\#");
  c = parse_credentials("user='it\\s'\npassword = '\"x\" = y'\r\n", "t");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->user, "it\\s");
  EXPECT_EQ(c->password, "\"x\" = y");  // and a CRLF line ends where the CR begins
  // An '=' in a value, a quote inside an unquoted one: as written.
  c = parse_credentials("user = a=b\npassword = it's\"\n", "t");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->user, "a=b");
  EXPECT_EQ(c->password, "it's\"");
  // No line ending at the end of the file.
  c = parse_credentials("token = t", "t");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->token, "t");
}

TEST(CredentialsTest, MalformedFilesAreRefusedWithTheLineAndNeverTheValue) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& k : {
           Case{"user = nt\npassword = \"open-secret\n", "t:2: the value's \" is not closed"},
           Case{"user = nt\npassword = 'open-secret\n", "t:2: the value's ' is not closed"},
           Case{"token = \"secret\" # note\n", "t:1: text after the quoted value"},
           Case{"token = \"se\\cret\"\n", "t:1: in \"...\", a backslash"},
           Case{"token = a\ntoken = b\n", "t:2: token is given twice"},
           Case{"secret-line\n", "t:1: expected key = value"},
           Case{"tokn = secret\n", "t:1: unknown key"},
           Case{"user = nt\npassword =\n", "neither a token nor a user and password"},
           Case{"# nothing\n", "neither a token nor a user and password"},
       }) {
    auto c = parse_credentials(k.text, "t");
    ASSERT_FALSE(c.ok()) << k.text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(k.says), std::string::npos) << c.status().message();
    EXPECT_EQ(c.status().message().find("secret"), std::string::npos) << c.status().message();
  }
  EXPECT_FALSE(parse_credentials(std::string("token = a\0b\n", 12), "t").ok());
}

TEST(CredentialsTest, AFifoIsRefusedWithoutBlocking) {
  TempDir d;
  const std::string path = d.path + "/creds";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  auto c = read_credentials(path);  // no writer: a blocking open would never return
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not a regular file"), std::string::npos);
}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A thread that wrote once and never wrapped holds its whole lifetime; the history users read
// to size --before is what every thread still holds: the busy thread's, since its oldest block.
TEST(RingHealthTest, HistoryIsWhatEveryThreadStillHoldsNotAnIdleThreadsLifetime) {
  const double gap = 0.3;
  const auto spawned = std::chrono::steady_clock::now();
  nanotrace::testing::ChildProcess child(
      {std::string(NANOTRACE_BIN_DIR) + "/nanotrace_fleet_history_producer", "--gap-ms", "300"},
      {"NANOTRACE_BUFFER=64K", "NANOTRACE_MODE=overwrite"});
  const std::string first = child.read_line();
  ASSERT_EQ(first.rfind("pid ", 0), 0u) << first;
  ASSERT_EQ(child.read_line(), "ready");
  const auto ready = std::chrono::steady_clock::now();
  auto p = attach_process(first.substr(4));
  ASSERT_TRUE(p.ok()) << p.status().message();
  const auto before = std::chrono::steady_clock::now();
  RingHealth h = ring_health(**p);
  const auto after = std::chrono::steady_clock::now();
  EXPECT_EQ(h.threads, 2u);
  EXPECT_EQ(h.wrapped_threads, 1u);  // the busy one
  EXPECT_GT(h.overwritten_bytes, 0u);
  // The busy thread began writing `gap` after the idle thread's record (itself after the
  // spawn), so every moment its ring holds is less than (now - spawn - gap) old; the idle
  // thread's lifetime, the old figure, is more than `gap`.
  EXPECT_LT(h.history_seconds, seconds_between(spawned, after) - gap);
  // Its oldest block was written before "ready": at least that long ago.
  EXPECT_GE(h.history_seconds, seconds_between(ready, before) * 0.999);
  EXPECT_GT(h.history_seconds, 0);
  child.close_stdin();
  child.wait();
}

// The origin's announcement is repeated every 500 ms for 2 s (at once when its link comes
// back), and one that no server confirmed in that time is reported as reaching nobody.
TEST(AnnouncementScheduleTest, RepeatsUntilItsTimeRunsOutAndSaysWhetherAServerTookIt) {
  constexpr uint64_t kMs = 1'000'000;
  AnnouncementSchedule s(2000 * kMs, 500 * kMs);
  EXPECT_EQ(s.next_ns(), UINT64_MAX);
  s.add("r1", "{r1}", /*confirmed=*/false, 1000 * kMs);  // the broker was down
  s.add("r2", "{r2}", /*confirmed=*/true, 1100 * kMs);
  EXPECT_TRUE(s.due(1400 * kMs).empty());
  EXPECT_EQ(s.next_ns(), 1500 * kMs);
  auto due = s.due(1500 * kMs);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].round, "r1");
  EXPECT_EQ(due[0].text, "{r1}");
  s.sent("r1", false);
  // The link comes back: both at once, and again 500 ms later.
  s.link_up(1700 * kMs);
  due = s.due(1700 * kMs);
  ASSERT_EQ(due.size(), 2u);
  s.sent("r1", true);
  s.sent("r2", true);
  EXPECT_TRUE(s.due(2100 * kMs).empty());
  EXPECT_EQ(s.due(2200 * kMs).size(), 2u);
  EXPECT_TRUE(s.expire(2999 * kMs).empty());
  auto gone = s.expire(3000 * kMs);  // r1's two seconds
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].round, "r1");
  EXPECT_TRUE(gone[0].reached);  // the copy after the link came back was confirmed
  EXPECT_EQ(gone[0].sent, 3u);   // the first, the one at 1.5 s, the one at 1.7 s
  EXPECT_EQ(s.pending(), 1u);
  // No copy confirmed, ever: it reached nobody.
  AnnouncementSchedule t(1000 * kMs, 500 * kMs);
  t.add("r3", "{r3}", false, 0);
  for (uint64_t now = 0; now < 1000 * kMs; now += 100 * kMs) {
    for (const auto& d : t.due(now)) t.sent(d.round, false);
  }
  gone = t.expire(1000 * kMs);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_FALSE(gone[0].reached);
  EXPECT_EQ(gone[0].sent, 2u);  // the first and the one at 500 ms (none due at its end)
  EXPECT_EQ(t.pending(), 0u);
  // Repeating for 0 s: announced once, nothing kept.
  AnnouncementSchedule once(0, 500 * kMs);
  once.add("r4", "{r4}", true, 0);
  EXPECT_EQ(once.pending(), 0u);
}

TEST(ProtocolTest, RefusesMalformedAndHostileMessages) {
  Freeze f;
  f.round = new_round_id(1764763501123456789ull, "node3");
  EXPECT_EQ(f.round, "20251203T120501.123456-node3");
  f.node = "node3";
  f.pid = 42;
  f.event = "io:complete";
  auto back = Freeze::parse(f.to_json());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->pid, 42u);
  EXPECT_EQ(back->round, f.round);
  for (const char* bad :
       {"", "[]", "{", R"({"round":"../../x","node":"n"})", R"({"round":"r","node":"a.b"})",
        R"({"round":"r","node":"n","pid":-1})", R"({"round":"r","node":"n","pid":"1"})"}) {
    EXPECT_FALSE(Freeze::parse(bad).ok()) << bad;
  }
  EXPECT_FALSE(Command::parse(R"({"op":"exec","command":"rm -rf /"})").ok());
  EXPECT_FALSE(Command::parse(R"({"op":"snapshot","round":"../x"})").ok());
  auto arm = Command::parse(R"({"op":"arm","expression":"io:error","after":"2ms"})");
  ASSERT_TRUE(arm.ok());
  EXPECT_EQ(arm->op, Command::Op::kArm);
  auto fetch = FetchRequest::parse(R"({"file":"x.nt","offset":0,"length":99999999999})");
  ASSERT_TRUE(fetch.ok());
  EXPECT_EQ(fetch->length, kFetchChunk);  // capped
  EXPECT_FALSE(valid_name("a.b"));
  EXPECT_FALSE(valid_name(std::string(65, 'a')));
  EXPECT_TRUE(valid_name("node-3_a"));
}

// A fetch's chunk, plain or zstd: a compressed answer is taken only when it decompresses,
// whole, to at most one chunk (the answer is untrusted); an agent's error comes back as one.
TEST(ProtocolTest, FetchAnswersCompressOnlyWhenAskedAndAreCheckedWhenRead) {
  auto request = FetchRequest::parse(R"({"file":"x.nt","offset":0,"length":10,"zstd":true})");
  ASSERT_TRUE(request.ok());
  EXPECT_TRUE(request->zstd);
  EXPECT_FALSE(FetchRequest::parse(R"({"file":"x.nt","zstd":"yes"})").ok());
  auto round_trip = FetchRequest::parse(FetchRequest{"y.nt", 5, 7, true}.to_json());
  ASSERT_TRUE(round_trip.ok());
  EXPECT_TRUE(round_trip->zstd);

  std::string text(200000, 'a');
  for (size_t i = 0; i < text.size(); i += 7) text[i] = static_cast<char>('a' + i % 23);
  const std::string plain = fetch_answer(text, false);
  EXPECT_EQ(plain[0], 'D');
  const std::string packed = fetch_answer(text, true);
  ASSERT_EQ(packed[0], 'Z');
  EXPECT_LT(packed.size(), text.size() / 4);
  for (const std::string* answer : {&plain, &packed}) {
    auto back = fetch_answer_bytes(*answer);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, text);
  }
  EXPECT_EQ(fetch_answer("", true), "D");  // nothing to compress
  auto error = fetch_answer_bytes("Erefused: ../x");
  EXPECT_EQ(error.status().code(), StatusCode::kIoError);
  EXPECT_EQ(error.status().message(), "refused: ../x");

  std::string damaged = packed;
  damaged[damaged.size() / 2] ^= 0x5a;
  damaged.resize(damaged.size() - 3);
  EXPECT_EQ(fetch_answer_bytes(damaged).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(fetch_answer_bytes("Znot a frame").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(fetch_answer_bytes("X").status().code(), StatusCode::kCorrupt);
  EXPECT_FALSE(fetch_answer_bytes("").ok());
  // More than a chunk once decompressed: refused, whatever the frame says.
  const std::string big = fetch_answer(std::string(kFetchChunk + 1, 'b'), true);
  ASSERT_EQ(big[0], 'Z');
  EXPECT_EQ(fetch_answer_bytes(big).status().code(), StatusCode::kCorrupt);
}

// Event and process names come from segments: bytes that are not UTF-8 must not throw out of
// the agent when its messages and manifests are written.
TEST(ProtocolTest, NamesThatAreNotUtf8AreReplacedNotThrown) {
  Freeze f;
  f.round = "r";
  f.node = "n";
  f.event = "io:\xff\xfe";
  f.expression = "io:\xc3";
  std::string text;
  ASSERT_NO_THROW(text = f.to_json());
  auto back = Freeze::parse(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->event, "io:\xef\xbf\xbd\xef\xbf\xbd");  // U+FFFD twice
}

// A daemon that misses a reply or two (its client timed out on a busy machine) leaves its last
// answer standing with that answer's time; the third miss in a row makes the clock unknown,
// and the next answer stands again.
TEST(ClockWatchTest, AnAnswerStandsThroughTwoMissedReadings) {
  const std::vector<file::SyncSource> script = {
      file::SyncSource::kChrony,  file::SyncSource::kUnknown, file::SyncSource::kUnknown,
      file::SyncSource::kUnknown, file::SyncSource::kChrony,  file::SyncSource::kChrony};
  std::atomic<size_t> entered{0};  // times the watch asked for a reading
  std::atomic<size_t> allowed{0};  // readings the test lets it have
  ClockWatch watch(1, [&] {
    const size_t index = entered++;
    while (index >= allowed.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rec::ClockSync s;
    s.source = script[std::min(index, script.size() - 1)];
    s.synchronised = s.source != file::SyncSource::kUnknown;
    s.bound_ns = s.synchronised ? 1000 : file::kUnknownBound;
    return s;
  });
  // What reading k left: let it through, and look once the watch waits for reading k + 1.
  auto after = [&](size_t k) {
    allowed = k + 1;
    while (entered.load() < k + 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return watch.current();
  };
  const ClockWatch::Reading first = after(0);
  EXPECT_EQ(first.sync.source, file::SyncSource::kChrony);
  for (size_t k : {1, 2}) {
    const ClockWatch::Reading r = after(k);
    EXPECT_EQ(r.sync.source, file::SyncSource::kChrony) << "reading " << k;
    EXPECT_EQ(r.read_monotonic_ns, first.read_monotonic_ns) << "reading " << k;
  }
  EXPECT_EQ(after(3).sync.source, file::SyncSource::kUnknown);
  const ClockWatch::Reading again = after(4);
  EXPECT_EQ(again.sync.source, file::SyncSource::kChrony);
  EXPECT_GT(again.read_monotonic_ns, first.read_monotonic_ns);
  allowed = SIZE_MAX;  // the watch's last reading ends, and it stops
}

// Rounds seen are remembered, up to a bound: a stream of made-up round ids cannot grow an
// agent's memory without end, and the oldest are forgotten first.
TEST(SeenRoundsTest, ARoundIsNewOnceAndTheOldestAreForgottenPastTheBound) {
  SeenRounds seen(3);
  EXPECT_TRUE(seen.insert("a"));
  EXPECT_FALSE(seen.insert("a"));
  EXPECT_TRUE(seen.insert("b"));
  EXPECT_TRUE(seen.insert("c"));
  EXPECT_TRUE(seen.insert("d"));  // past the bound: "a" goes
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_FALSE(seen.insert("b"));
  EXPECT_FALSE(seen.insert("d"));
  EXPECT_TRUE(seen.insert("a"));  // forgotten, so new again (the rate policy still applies)
  for (int i = 0; i < 100000; ++i) seen.insert("made-up-" + std::to_string(i));
  EXPECT_EQ(seen.size(), 3u);
}

}  // namespace
}  // namespace nanotrace::fleet
