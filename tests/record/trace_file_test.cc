// Trace files read back like segments: dump, stats and export give the same records on a
// file as on the segment it was taken from. And a damaged file (cut at every chunk boundary
// and inside chunks, random byte flips) is rejected with a one-line error or read as its
// valid prefix: never a crash, never a record that fails its checksum.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/file_format.hpp"
#include "reader/trace_internals.hpp"
#include "record_helpers.hpp"

namespace nanotrace {
namespace {

using testing::ChildProcess;
using testing::kCli;
using testing::kProducer;

struct HeldProducer {
  ChildProcess child;
  pid_t pid = 0;
  HeldProducer(const std::vector<std::string>& args, const std::vector<std::string>& env)
      : child(args, env) {
    pid = testing::read_pid(child);
    EXPECT_EQ(child.read_line(), "ready");
  }
  ~HeldProducer() {
    child.close_stdin();
    child.wait();
  }
};

std::string run(const std::string& cmd) {
  int code = 0;
  std::string out = testing::run_command(cmd, &code);
  EXPECT_EQ(code, 0) << cmd << "\n" << out;
  return out;
}

// dump --json without the time (the file's clock calibration may be newer than the one the
// segment had when it was read).
std::string without_times(const std::string& dump) {
  std::istringstream in(dump);
  std::string line, out;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    j.erase("time_ns");
    out += j.dump() + "\n";
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(TraceFileTest, DumpStatsAndExportMatchTheSegment) {
  HeldProducer p({kProducer, "--threads", "3", "--events", "4000", "--hold"},
                 {"NANOTRACE_BUFFER=1M"});
  std::string pid = std::to_string(p.pid);
  for (const char* compress : {"", " --compress"}) {
    std::string file = testing::temp_path("same.ntr");
    run(kCli + " snapshot " + pid + " -o " + file + compress + " 2>/dev/null");
    std::string seg_dump = run(kCli + " dump --json " + pid);
    std::string file_dump = run(kCli + " dump --json " + file);
    EXPECT_EQ(std::count(seg_dump.begin(), seg_dump.end(), '\n'), 12000);
    EXPECT_EQ(without_times(seg_dump), without_times(file_dump));
    auto seg_stats = nlohmann::json::parse(run(kCli + " stats --json " + pid));
    auto file_stats = nlohmann::json::parse(run(kCli + " stats --json " + file));
    EXPECT_EQ(seg_stats["records"], file_stats["records"]);
    EXPECT_EQ(seg_stats["lost"], file_stats["lost"]);
    EXPECT_EQ(seg_stats["events"][0]["count"], file_stats["events"][0]["count"]);
    EXPECT_EQ(seg_stats["threads"].size(), file_stats["threads"].size());
    EXPECT_EQ(run(kCli + " events " + pid), run(kCli + " events " + file));
    // CTF: babeltrace2 reads both and sees the same event payloads.
    std::string ctf_seg = testing::temp_path("ctf-seg"), ctf_file = testing::temp_path("ctf-file");
    run(kCli + " export -f ctf -o " + ctf_seg + " " + pid + " 2>&1");
    run(kCli + " export -f ctf -o " + ctf_file + " " + file + " 2>&1");
    std::string strip = " | sed 's/^\\[[^]]*\\] ([^)]*) //' | sort | md5sum";
    std::string a = run("babeltrace2 " + ctf_seg + strip);
    std::string b = run("babeltrace2 " + ctf_file + strip);
    EXPECT_EQ(a, b);
    EXPECT_EQ(run("babeltrace2 " + ctf_file + " | wc -l"), "12000\n");
    run("rm -rf " + ctf_seg + " " + ctf_file);
    unlink(file.c_str());
  }
}

// Offsets of every chunk header in a well-formed file.
std::vector<size_t> chunk_offsets(const std::string& data) {
  std::vector<size_t> out;
  size_t off = sizeof(file::FileHeader);
  while (off + sizeof(file::ChunkHeader) <= data.size()) {
    out.push_back(off);
    file::ChunkHeader h;
    std::memcpy(&h, data.data() + off, sizeof(h));
    off += sizeof(h) + h.stored_size;
  }
  out.push_back(data.size());
  return out;
}

// Opens and reads a damaged file; every record returned must be intact.
void read_damaged(const std::string& path, uint64_t max_records, const std::string& what) {
  auto t = Trace::open(path);
  if (!t.ok()) {
    const std::string& m = t.status().message();
    EXPECT_FALSE(m.empty());
    EXPECT_EQ(m.find('\n'), std::string::npos) << what;
    return;
  }
  auto r = testing::read_test_records(**t);
  EXPECT_EQ(r.bad_checksums, 0u) << what;
  EXPECT_LE(r.records.size(), max_records) << what;
  EXPECT_EQ(testing::check_continuity(r).gaps, 0u) << what;
}

TEST(TraceFileTest, DamagedFilesAreRejectedOrReadAsAPrefix) {
  HeldProducer p({kProducer, "--threads", "2", "--events", "3000", "--hold"},
                 {"NANOTRACE_BUFFER=64K"});
  std::string good = testing::temp_path("good.ntr");
  for (const char* compress : {"", " --compress"}) {
    run(kCli + " snapshot " + std::to_string(p.pid) + " -o " + good + compress + " 2>/dev/null");
    std::string data = read_file(good);
    auto whole = testing::open_ok(good);
    ASSERT_TRUE(whole);
    uint64_t all = testing::read_test_records(*whole).records.size();
    ASSERT_GT(all, 1000u);
    std::string bad = testing::temp_path("bad.ntr");
    std::vector<size_t> offsets = chunk_offsets(data);
    ASSERT_GT(offsets.size(), 4u);
    // Cut at every chunk boundary, just after it, and in the middle of each chunk.
    for (size_t i = 0; i < offsets.size(); ++i) {
      for (size_t cut : {offsets[i], offsets[i] + 1, offsets[i] + 47,
                         i + 1 < offsets.size() ? (offsets[i] + offsets[i + 1]) / 2 : 0}) {
        if (cut == 0 || cut > data.size()) continue;
        write_file(bad, data.substr(0, cut));
        read_damaged(bad, all, "cut at " + std::to_string(cut));
      }
    }
    for (size_t cut : {size_t{0}, size_t{7}, size_t{63}}) {
      write_file(bad, data.substr(0, cut));
      EXPECT_FALSE(Trace::open(bad).ok());
    }
    // Random byte flips, one to four at a time.
    std::mt19937_64 rng(42);
    for (int i = 0; i < 400; ++i) {
      std::string copy = data;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k)
        copy[rng() % copy.size()] ^= static_cast<char>(1 + rng() % 255);
      write_file(bad, copy);
      read_damaged(bad, all, "flip round " + std::to_string(i));
    }
    unlink(bad.c_str());
  }
  unlink(good.c_str());
}

TEST(TraceFileTest, ToolsSayWhatDamageCost) {
  HeldProducer p({kProducer, "--threads", "2", "--events", "3000", "--hold"},
                 {"NANOTRACE_BUFFER=1M"});
  std::string good = testing::temp_path("said.ntr"), bad = testing::temp_path("said-bad.ntr");
  run(kCli + " snapshot " + std::to_string(p.pid) + " -o " + good + " 2>/dev/null");
  std::string data = read_file(good);
  std::vector<size_t> offsets = chunk_offsets(data);
  // A cut tail: read as its valid prefix, with a warning naming the file.
  write_file(bad, data.substr(0, (offsets[offsets.size() - 2] + data.size()) / 2));
  std::string out = run(kCli + " dump " + bad + " 2>&1 >/dev/null");
  EXPECT_NE(out.find("nanotrace: warning: " + bad + ": incomplete chunk"), std::string::npos)
      << out;
  // A flipped byte in the first DATA payload: that stream ends there, the other is whole,
  // and export and dump say that blocks were skipped and count the damaged stream's records
  // (the writer's count from its LOSS chunk) as lost.
  size_t first_data = 0;
  for (size_t off : offsets) {
    file::ChunkHeader h;
    if (off + sizeof(h) > data.size()) break;
    std::memcpy(&h, data.data() + off, sizeof(h));
    if (h.type == static_cast<uint16_t>(file::ChunkType::kData)) {
      first_data = off;
      break;
    }
  }
  ASSERT_GT(first_data, 0u);
  std::string flipped = data;
  flipped[first_data + sizeof(file::ChunkHeader) + 100] ^= 0x40;
  write_file(bad, flipped);
  std::string ctf = testing::temp_path("said-ctf");
  out = run(kCli + " export -f ctf -o " + ctf + " " + bad + " 2>&1");
  EXPECT_NE(out.find("exported 3000 records of 1 threads (3000 lost, 1 corrupt blocks skipped)"),
            std::string::npos)
      << out;
  out = run(kCli + " dump " + bad + " 2>&1 >/dev/null");
  EXPECT_NE(out.find("3000 records lost (0 overwritten, 0 dropped), 1 corrupt blocks skipped, "
                     "3000 records unreadable"),
            std::string::npos)
      << out;
  out = run(kCli + " stats " + bad + " 2>&1");
  EXPECT_NE(out.find("3000 lost"), std::string::npos) << out;
  EXPECT_NE(out.find("damaged: 1 corrupt blocks skipped, 3000 records unreadable"),
            std::string::npos)
      << out;
  run("rm -rf " + ctf);
  unlink(bad.c_str());
  unlink(good.c_str());
}

TEST(TraceFileTest, RecoverSaysWhichBlocksWereDamaged) {
  // A dead process's ring with one block header overwritten: recover skips the block, counts
  // its records as overwritten (the next block's sequence number says how many) and says
  // that a block was damaged.
  pid_t pid;
  {
    ChildProcess producer({kProducer, "--threads", "1", "--events", "20000"},
                          {"NANOTRACE_MODE=discard", "NANOTRACE_BUFFER=1M", "NANOTRACE_KEEP=1"});
    pid = testing::read_pid(producer);
    ASSERT_GT(pid, 0);
    producer.wait();
  }
  std::string segment = testing::segment_of(pid);
  {
    auto trace = testing::open_ok(segment);
    ASSERT_TRUE(trace);
    ASSERT_FALSE(trace->process().alive);
    auto* h = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(*trace));
    ASSERT_EQ(trace->threads().size(), 1u);
    uint64_t at = h->rings_offset + uint64_t{trace->threads()[0].slot} * h->ring_size +
                  2 * uint64_t{h->block_size};  // the third block's position field
    int fd = ::open(segment.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    uint64_t bogus = 12345;
    ASSERT_EQ(::pwrite(fd, &bogus, sizeof(bogus), static_cast<off_t>(at)), 8);
    ::close(fd);
  }
  std::string file = testing::temp_path("damaged-recover.ntr");
  std::string out = run(kCli + " recover " + std::to_string(pid) + " -o " + file + " 2>&1");
  EXPECT_NE(out.find("corrupt blocks skipped"), std::string::npos) << out;
  auto trace = testing::open_ok(file);
  ASSERT_TRUE(trace);
  auto r = testing::read_test_records(*trace);
  EXPECT_EQ(r.bad_checksums, 0u);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_GT(r.threads[0].overwritten, 0u);
  EXPECT_EQ(r.records.size() + r.threads[0].overwritten, 20000u);
  unlink(file.c_str());
  unlink(segment.c_str());
}

TEST(TraceFileTest, NotATraceFile) {
  std::string path = testing::temp_path("junk.ntr");
  write_file(path, std::string("NANOTRCF") + std::string(100, '\0'));
  auto t = Trace::open(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(path), std::string::npos);
  int code = 0;
  std::string out = testing::run_command(kCli + " dump " + path + " 2>&1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(out.rfind("nanotrace: ", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  unlink(path.c_str());
}

}  // namespace
}  // namespace nanotrace
