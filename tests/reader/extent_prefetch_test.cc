// Read-ahead of trace file extents (reader/extent_prefetch.hpp): a slot hands over exactly the
// bytes read_extent reads, or its error for a damaged chunk; the budget bounds how many
// streams read ahead and comes back when a slot is dropped, even with a read in flight; a file
// with more thread streams than the budget reads back record for record like the segment it
// was taken from; a read abandoned half-way stops without waiting or racing (this test also
// runs under ThreadSanitizer); and a child forked in the middle of a read finishes it, never
// waiting for a lock of the read-ahead worker it does not have.
#include "reader/extent_prefetch.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "common/child_process.hpp"
#include "nanotrace/columns.hpp"
#include "nanotrace/record.hpp"

namespace nanotrace {
namespace {

const std::string kBin = NANOTRACE_BIN_DIR;

// A traced process held alive after writing `events` records on each of `threads` threads
// into 1 MiB rings (the snapshot writes 256 KiB chunks: several extents per thread).
struct HeldProducer {
  testing::ChildProcess child;
  pid_t pid = 0;
  HeldProducer(int threads, int events)
      : child({kBin + "/nanotrace_test_producer", "--threads", std::to_string(threads), "--events",
               std::to_string(events), "--hold"},
              {"NANOTRACE_BUFFER=1M"}) {
    pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
    EXPECT_EQ(child.read_line(), "ready");
  }
  ~HeldProducer() {
    child.close_stdin();
    child.wait();
  }
};

std::string temp_file(const std::string& name) {
  return ::testing::TempDir() + "prefetch-" + std::to_string(getpid()) + "-" + name;
}

std::string snapshot(Trace& trace, const std::string& name, bool compress) {
  std::string file = temp_file(name);
  auto summary = write_snapshot(trace, file, compress);
  EXPECT_TRUE(summary.ok()) << summary.status().message();
  return file;
}

// A trace file of `threads` x `events` records from a held producer ("" on failure).
std::string trace_file_of(int threads, int events, const std::string& name, bool compress) {
  HeldProducer p(threads, events);
  auto segment = Trace::open(std::to_string(p.pid));
  EXPECT_TRUE(segment.ok()) << segment.status().message();
  return segment.ok() ? snapshot(**segment, name, compress) : "";
}

// A record as both a segment and a file give it (the thread by its tid: the two may list
// threads in another order).
// One record: its thread, number and clock value, and a 64-bit FNV-1a digest of its event's
// name and every field (type, bits or text). Plain values: the comparison of 1.3 million
// records stays quick under AddressSanitizer, whose allocations made a row of strings and
// vectors cost a minute.
struct Row {
  uint32_t tid;
  uint64_t seq, ticks, content;
  auto operator<=>(const Row&) const = default;
};

uint64_t digest(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t content_of(const Record& r) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = digest(h, r.event->group.data(), r.event->group.size() + 1);
  h = digest(h, r.event->name.data(), r.event->name.size() + 1);
  for (uint32_t i = 0; i < r.field_count; ++i) {
    const FieldValue& v = r.values[i];
    h = digest(h, &v.type, sizeof(v.type));
    if (v.type == abi::FieldType::kString) {
      h = digest(h, v.text.data(), v.text.size());
      const uint64_t size = v.text.size();
      h = digest(h, &size, sizeof(size));
    } else {
      h = digest(h, &v.bits, sizeof(v.bits));
    }
  }
  return h;
}

std::vector<Row> sorted_rows(Trace& trace, uint64_t* lost) {
  std::vector<ThreadInfo> threads = trace.threads();
  std::vector<Row> out;
  auto source = trace.read_all();
  Record r;
  while (source->next(&r)) out.push_back({threads[r.thread].tid, r.seq, r.ticks, content_of(r)});
  *lost = 0;
  for (const ThreadStats& s : source->threads()) {
    *lost += s.lost();
    EXPECT_EQ(s.corrupt_blocks, 0u) << "thread " << s.info.tid;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::shared_ptr<reader::TraceFile> open_index(const std::string& path) {
  auto file = reader::TraceFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  return file.ok() ? *file : nullptr;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string bytes_of(const reader::ChunkBuffer& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// More thread streams than the read-ahead budget (64): the first ones read ahead, the rest
// read in place, and every record is the segment's, compressed or not.
TEST(ExtentPrefetchTest, FileWithMoreStreamsThanTheBudgetMatchesTheSegment) {
  HeldProducer p(66, 20000);
  auto segment = Trace::open(std::to_string(p.pid));
  ASSERT_TRUE(segment.ok()) << segment.status().message();
  uint64_t segment_lost = 0;
  std::vector<Row> expected = sorted_rows(**segment, &segment_lost);
  ASSERT_GT(expected.size(), 66u * 10000);  // each 1 MiB ring holds about 19,000 of them
  for (bool compress : {false, true}) {
    std::string file = snapshot(**segment, compress ? "packed.ntr" : "plain.ntr", compress);
    auto index = open_index(file);
    ASSERT_NE(index, nullptr);
    ASSERT_EQ(index->streams.size(), 66u);
    for (const reader::FileStream& s : index->streams) ASSERT_GE(s.extents.size(), 3u);
    auto from_file = Trace::open(file);
    ASSERT_TRUE(from_file.ok()) << from_file.status().message();
    uint64_t lost = 0;
    std::vector<Row> got = sorted_rows(**from_file, &lost);
    EXPECT_EQ(lost, segment_lost);  // the records the rings overwrote before the snapshot
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "row " << i;
    // The columnar read (spans, unchecked blocks) counts the same rows.
    auto set = read_columns(**from_file);
    ASSERT_TRUE(set.ok()) << set.status().message();
    EXPECT_EQ(set->rows, expected.size());
    EXPECT_EQ(set->corrupt_blocks, 0u);
    std::filesystem::remove(file);
  }
}

TEST(ExtentPrefetchTest, SlotsHandOverWhatReadExtentReadsWithinTheBudget) {
  std::string file = trace_file_of(2, 60000, "slots.ntr", true);
  ASSERT_FALSE(file.empty());
  auto index = open_index(file);
  ASSERT_NE(index, nullptr);
  const std::vector<reader::Extent>& extents = index->streams[0].extents;
  ASSERT_GE(extents.size(), 3u);

  auto prefetcher = std::make_shared<reader::ExtentPrefetcher>(1);
  reader::ExtentSlot first;
  {
    reader::ExtentSlot second;
    ASSERT_TRUE(first.try_join(prefetcher));
    EXPECT_FALSE(second.try_join(prefetcher)) << "a second share of a budget of one";
  }
  reader::ChunkBuffer direct, scratch, ahead;
  for (const reader::Extent& e : extents) {
    ASSERT_TRUE(index->read_extent(e, &direct, &scratch).ok());
    first.load(*index, e);
    EXPECT_TRUE(first.holds(e.offset));
    Status s = first.take(&ahead);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_FALSE(first.holds(e.offset));
    EXPECT_EQ(ahead.size(), e.raw);
    EXPECT_EQ(bytes_of(ahead), bytes_of(direct));
  }
  // Dropped with a read queued or in flight: the share comes back, nothing waits for long.
  for (int i = 0; i < 200; ++i) {
    const reader::Extent& e = extents[static_cast<size_t>(i) % extents.size()];
    ASSERT_TRUE(first.try_join(prefetcher));
    first.load(*index, e);
    first.leave();
    reader::ExtentSlot other;
    ASSERT_TRUE(other.try_join(prefetcher)) << "round " << i;
    other.load(*index, e);
  }  // other is destroyed with its read in flight
  std::filesystem::remove(file);
}

// A chunk whose payload was damaged after the file was indexed: the slot reports read_extent's
// error, and the read as a whole counts a corrupt block instead of returning its records.
TEST(ExtentPrefetchTest, DamagedExtentIsReportedThroughTheSlot) {
  std::string file = trace_file_of(1, 60000, "damaged.ntr", false);
  ASSERT_FALSE(file.empty());
  auto index = open_index(file);
  ASSERT_NE(index, nullptr);
  ASSERT_GE(index->streams[0].extents.size(), 3u);
  const reader::Extent victim = index->streams[0].extents[1];
  {
    std::string bytes = read_bytes(file);
    bytes[victim.offset + victim.stored / 2] ^= 0x40;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }
  auto prefetcher = std::make_shared<reader::ExtentPrefetcher>(4);
  reader::ExtentSlot slot;
  ASSERT_TRUE(slot.try_join(prefetcher));
  reader::ChunkBuffer out;
  slot.load(*index, victim);
  Status s = slot.take(&out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("fails its checksum"), std::string::npos) << s.message();

  auto damaged = Trace::open(file);
  ASSERT_TRUE(damaged.ok()) << damaged.status().message();
  auto source = (*damaged)->read_all();
  Record r;
  uint64_t records = 0;
  while (source->next(&r)) ++records;
  ASSERT_EQ(source->threads().size(), 1u);
  EXPECT_EQ(source->threads()[0].corrupt_blocks, 1u);
  EXPECT_GT(records, 0u);
  EXPECT_LT(records, 60000u);
  std::filesystem::remove(file);
}

// Readers dropped after a few records, while their streams' next extents are in flight.
TEST(ExtentPrefetchTest, AbandonedReadsStopCleanly) {
  std::string file = trace_file_of(8, 40000, "abandoned.ntr", true);
  ASSERT_FALSE(file.empty());
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok());
  for (int round = 0; round < 50; ++round) {
    auto source = (*trace)->read_all();
    Record r;
    for (int i = 0; i < 1000 * round && source->next(&r); ++i) {
    }
    auto reader = ColumnReader::open(**trace, {});
    ASSERT_TRUE(reader.ok());
    ColumnSet batch;
    ASSERT_TRUE((*reader)->next(&batch, 100 + 5000 * static_cast<size_t>(round)));
    EXPECT_GT(batch.rows, 0u);
  }
  std::filesystem::remove(file);
}

// A process that forks in the middle of a read (Python's multiprocessing does): the child
// goes on reading without the worker thread, which it does not have, and gets every record;
// so does the parent.
TEST(ExtentPrefetchTest, ReadGoesOnInAChildForkedMidway) {
  std::string file = trace_file_of(4, 40000, "forked.ntr", true);
  ASSERT_FALSE(file.empty());
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok());
  uint64_t total = 0;
  {
    auto all = (*trace)->read_all();
    Record r;
    while (all->next(&r)) ++total;
  }
  ASSERT_GT(total, 40000u);
  for (int round = 0; round < 5; ++round) {
    auto source = (*trace)->read_all();
    Record r;
    uint64_t before = 0;
    while (before < 3000 * static_cast<uint64_t>(round + 1) && source->next(&r)) ++before;
    pid_t child = fork();
    ASSERT_GE(child, 0);
    uint64_t after = 0;
    while (source->next(&r)) ++after;
    if (child == 0) {
      source.reset();  // its prefetcher's worker and lock are the parent's: left alone
      _exit(before + after == total ? 0 : 1);
    }
    EXPECT_EQ(before + after, total);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "round " << round;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "round " << round << ": the child read other records";
  }
  std::filesystem::remove(file);
}

// Forks that land anywhere in the read-ahead: a worker caught in the middle of a read may
// hold a lock that read takes (under ASan, the allocator's: GCC 12's ASan does not reset its
// locks in a child), and the child, which reads that extent again in place, then waited for
// it forever. Fork waits for reads in progress now. A child that has not finished within
// a minute is reported hung (and killed) instead of stalling the test.
TEST(ExtentPrefetchTest, ChildrenForkedThroughoutAReadNeverHang) {
  std::string file = trace_file_of(8, 20000, "fork-storm.ntr", true);
  ASSERT_FALSE(file.empty());
  auto trace = Trace::open(file);
  ASSERT_TRUE(trace.ok());
  uint64_t total = 0;
  {
    auto all = (*trace)->read_all();
    Record r;
    while (all->next(&r)) ++total;
  }
  ASSERT_GE(total, 8u * 20000u);
  const int kRounds = 40;
  for (int round = 0; round < kRounds; ++round) {
    auto source = (*trace)->read_all();
    Record r;
    uint64_t before = 0;
    // Forks spread over the file, each at a different point of some stream's read-ahead.
    const uint64_t fork_at = total * static_cast<uint64_t>(round) / kRounds + 97 * round;
    while (before < fork_at && source->next(&r)) ++before;
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      uint64_t after = 0;
      while (source->next(&r)) ++after;
      _exit(before + after == total ? 0 : 1);
    }
    int status = 0;
    pid_t done = 0;
    for (int waited_ms = 0; waited_ms < 60000 && done == 0; waited_ms += 10) {
      done = waitpid(child, &status, WNOHANG);
      if (done == 0) usleep(10000);
    }
    if (done == 0) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      FAIL() << "round " << round << ": the child forked after " << before
             << " records hung for a minute";
    }
    ASSERT_EQ(done, child);
    ASSERT_TRUE(WIFEXITED(status)) << "round " << round;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "round " << round << ": the child read other records";
  }
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace nanotrace
