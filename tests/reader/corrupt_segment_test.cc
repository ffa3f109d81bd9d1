// Hostile segments: a reader must reject a truncated or corrupted segment with a clear
// error, and must never crash or read out of bounds, whatever the bytes say. Each case
// copies a real segment (from the producer) and damages one thing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/process.hpp"
#include "common/child_process.hpp"
#include "nanotrace/abi.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

class CorruptSegmentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::ChildProcess child({std::string(NANOTRACE_BIN_DIR) + "/nanotrace_test_producer",
                                 "--threads", "2", "--events", "1000", "--hold"},
                                {"NANOTRACE_BUFFER=64K", "NANOTRACE_THREADS=4"});
    pid_t pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
    EXPECT_EQ(child.read_line(), "ready");
    std::ifstream in(testing::segment_of(pid), std::ios::binary);
    pristine_ = new std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                                         std::istreambuf_iterator<char>());
    child.close_stdin();
    child.wait();
  }
  static void TearDownTestSuite() { delete pristine_; }

  void SetUp() override {
    path_ = ::testing::TempDir() + "nanotrace-corrupt-" + std::to_string(getpid());
    bytes_ = *pristine_;
  }
  void TearDown() override { unlink(path_.c_str()); }

  abi::SegmentHeader& header() { return *reinterpret_cast<abi::SegmentHeader*>(bytes_.data()); }
  void write_file() {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes_.data()), static_cast<long>(bytes_.size()));
    out.close();
    chmod(path_.c_str(), 0600);
  }
  Status open_status() {
    write_file();
    auto t = Trace::open_path(path_);
    return t.ok() ? Status::Ok() : t.status();
  }
  // Opens and reads everything; must not crash. Returns records read.
  uint64_t read_everything() {
    write_file();
    auto t = Trace::open_path(path_);
    if (!t.ok()) return 0;
    auto src = (*t)->read_all();
    Record r;
    uint64_t n = 0;
    while (src->next(&r)) {
      ++n;
      for (uint32_t f = 0; f < r.field_count; ++f) (void)format_value(r.values[f]);
    }
    (void)(*t)->threads();
    (void)(*t)->groups();
    return n;
  }

  static std::vector<uint8_t>* pristine_;
  std::vector<uint8_t> bytes_;
  std::string path_;
};
std::vector<uint8_t>* CorruptSegmentTest::pristine_ = nullptr;

TEST_F(CorruptSegmentTest, PristineCopyReads) {
  ASSERT_TRUE(open_status().ok());
  EXPECT_EQ(read_everything(), 2000u);
}

TEST_F(CorruptSegmentTest, TruncatedIsRejected) {
  bytes_.resize(bytes_.size() / 2);
  Status s = open_status();
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("size"), std::string::npos) << s.message();
  bytes_.resize(100);
  EXPECT_EQ(open_status().code(), StatusCode::kCorrupt);
  bytes_.clear();
  EXPECT_EQ(open_status().code(), StatusCode::kCorrupt);
}

TEST_F(CorruptSegmentTest, BadMagicAndVersion) {
  header().magic[0] = 'X';
  EXPECT_NE(open_status().message().find("magic"), std::string::npos);
  bytes_ = *pristine_;
  header().version = 99;
  Status s = open_status();
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("version 99"), std::string::npos) << s.message();
}

// A reader that opens a segment while its creator is still writing the header (the writer
// lock held, the version not yet set) waits for it; without a creator it does not wait.
TEST_F(CorruptSegmentTest, ASegmentBeingCreatedIsWaitedForOnlyWhileItsCreatorHoldsIt) {
  const uint32_t version = header().version;
  header().version = 0;
  write_file();
  const int creator = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(creator, 0);
  ASSERT_TRUE(sys::lock_segment_byte(creator, sys::kWriterLockByte));
  std::thread finish([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(::pwrite(creator, &version, sizeof(version), offsetof(abi::SegmentHeader, version)),
              static_cast<ssize_t>(sizeof(version)));
  });
  auto t = Trace::open_path(path_);
  finish.join();
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->process().pid, header().pid);
  ::close(creator);

  write_file();  // version 0 again, nobody holding it
  auto start = std::chrono::steady_clock::now();
  auto refused = Trace::open_path(path_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("still being created"), std::string::npos)
      << refused.status().message();
  // A wait would last its whole second: nothing would end it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900))
      << "waited without a creator";
}

TEST_F(CorruptSegmentTest, OutOfBoundsTablesAreRejected) {
  struct Case {
    const char* what;
    void (*damage)(abi::SegmentHeader&);
  };
  const Case cases[] = {
      {"events offset", [](abi::SegmentHeader& h) { h.events_offset = ~uint64_t{0} - 10; }},
      {"events count", [](abi::SegmentHeader& h) { h.events_count = h.events_capacity + 1; }},
      {"groups count", [](abi::SegmentHeader& h) { h.groups_count = 100000; }},
      {"strings used", [](abi::SegmentHeader& h) { h.strings_used = h.strings_capacity + 1; }},
      {"threads", [](abi::SegmentHeader& h) { h.max_threads = 1u << 30; }},
      {"ring size", [](abi::SegmentHeader& h) { h.ring_size = 12345; }},
      {"block size", [](abi::SegmentHeader& h) { h.block_size = h.ring_size * 2; }},
      {"rings offset", [](abi::SegmentHeader& h) { h.rings_offset = h.segment_size; }},
      {"mode", [](abi::SegmentHeader& h) { h.mode = 7; }},
      {"clock kind", [](abi::SegmentHeader& h) { h.clock_kind = 9; }},
  };
  for (const Case& c : cases) {
    bytes_ = *pristine_;
    c.damage(header());
    Status s = open_status();
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << c.what << ": " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);  // one line
  }
}

TEST_F(CorruptSegmentTest, BadEventEntryIsRejected) {
  auto* e = reinterpret_cast<abi::EventEntry*>(bytes_.data() + header().events_offset);
  e[0].field_count = 200;
  EXPECT_EQ(open_status().code(), StatusCode::kCorrupt);
  bytes_ = *pristine_;
  e = reinterpret_cast<abi::EventEntry*>(bytes_.data() + header().events_offset);
  e[0].field_types[0] = 77;
  EXPECT_EQ(open_status().code(), StatusCode::kCorrupt);
  bytes_ = *pristine_;
  e = reinterpret_cast<abi::EventEntry*>(bytes_.data() + header().events_offset);
  e[0].name = 0xfffffff0;  // string offsets out of the pool read as empty, not out of bounds
  EXPECT_TRUE(open_status().ok());
}

TEST_F(CorruptSegmentTest, DamagedRingsAreSkippedNotTrusted) {
  const abi::SegmentHeader h = header();
  // Garbage over the first ring: the reader must skip what it cannot validate.
  std::mt19937_64 rng(42);
  for (uint64_t i = 0; i < h.ring_size; i += 8) {
    uint64_t v = rng();
    std::memcpy(bytes_.data() + h.rings_offset + i, &v, 8);
  }
  uint64_t n = read_everything();
  EXPECT_LT(n, 2000u);
  EXPECT_GE(n, 1000u);  // the second thread's ring is intact
  // Thread slots claiming absurd heads and generations.
  bytes_ = *pristine_;
  auto* slots = reinterpret_cast<abi::ThreadSlot*>(bytes_.data() + h.threads_offset);
  slots[0].head = ~uint64_t{0} - 3;
  slots[1].state = 9;
  read_everything();  // no crash is the assertion; ASan checks the bounds
  // A head a few bytes into a block: less than a block header to read there.
  bytes_ = *pristine_;
  slots = reinterpret_cast<abi::ThreadSlot*>(bytes_.data() + h.threads_offset);
  slots[0].head = 5;
  EXPECT_EQ(read_everything(), 1000u);  // the second thread only
}

// Reads every thread of an open trace, merged or as spans: records and corrupt blocks.
std::pair<uint64_t, uint64_t> count_records(Trace& trace, bool spans) {
  uint64_t records = 0, corrupt = 0;
  if (spans) {
    for (auto& source : trace.read_spans()) {
      RecordSpan span;
      while (source->next(&span)) records += span.records;
      corrupt += source->stats().corrupt_blocks;
    }
  } else {
    auto source = trace.read_all();
    Record r;
    while (source->next(&r)) ++records;
    for (const ThreadStats& s : source->threads()) corrupt += s.corrupt_blocks;
  }
  return {records, corrupt};
}

TEST_F(CorruptSegmentTest, ShrunkAfterOpenLosesTheMissingBlocksOnly) {
  // Another process truncates the segment while it is read: the rings' bytes past the new
  // end are gone. They are counted as corrupt blocks, never read through the mapping (which
  // would raise SIGBUS).
  const abi::SegmentHeader h = header();
  write_file();
  auto t = Trace::open_path(path_);
  ASSERT_TRUE(t.ok()) << t.status().message();
  // The first thread's ring is whole, the second's is gone.
  ASSERT_EQ(truncate(path_.c_str(), static_cast<off_t>(h.rings_offset + h.ring_size)), 0);
  for (bool spans : {false, true}) {
    auto [records, corrupt] = count_records(**t, spans);
    EXPECT_EQ(records, 1000u) << (spans ? "spans" : "merged");
    EXPECT_EQ(corrupt, 1u) << (spans ? "spans" : "merged");
  }
  // Cut inside the first ring: the blocks before the cut still read.
  ASSERT_EQ(truncate(path_.c_str(), static_cast<off_t>(h.rings_offset + h.ring_size / 2)), 0);
  for (bool spans : {false, true}) {
    auto [records, corrupt] = count_records(**t, spans);
    EXPECT_GT(records, 500u) << (spans ? "spans" : "merged");
    EXPECT_LT(records, 1000u) << (spans ? "spans" : "merged");
    EXPECT_EQ(corrupt, 2u) << (spans ? "spans" : "merged");
  }
}

TEST_F(CorruptSegmentTest, RandomByteFlipsNeverCrash) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    bytes_ = *pristine_;
    int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      // Bias towards the header and tables, where the offsets live.
      uint64_t limit = (rng() & 1) ? sizeof(abi::SegmentHeader) + 64 * 1024 : bytes_.size();
      bytes_[rng() % limit] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    read_everything();
  }
  SUCCEED();
}

TEST_F(CorruptSegmentTest, NotASegmentAtAll) {
  EXPECT_EQ(Trace::open_path("/nonexistent/nanotrace-1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Trace::open_path("/dev/null").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Trace::open("999999999").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Trace::open("name:no-such-process-name").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace nanotrace
