// BlockSenders without a server (make check): every block arrives whole, byte for byte, on
// at most `connections` inserts at once (and that many do run at once); the first error of
// any insert is the one kept and no block is inserted after it; a malformed block is refused
// before it is taken. The inserts are functions of the test: what a real server makes of the
// blocks is tests/ship/ship_test.cc's.
#include "ship/block_senders.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ship/trace_rows.hpp"

namespace nanotrace::ship {
namespace {

const TableDef kTable{"t", {{"n", "UInt64"}, {"s", "String"}, {"a", "Array(UInt32)"}}, "n"};

// Rows first .. first + count - 1 of kTable.
void fill(NativeBlock* b, uint64_t first, uint64_t count) {
  for (uint64_t n = first; n < first + count; ++n) {
    b->put<uint64_t>(0, n);
    b->put_string(1, std::string(n % 7, 'x'));
    for (uint32_t i = 0; i < n % 3; ++i) b->put<uint32_t>(2, i);
    b->end_array(2);
    b->end_row();
  }
}

std::string joined(const std::vector<std::string_view>& pieces) {
  std::string out;
  for (std::string_view p : pieces) out.append(p);
  return out;
}

// The first value of a Native block of kTable (its column n's first UInt64).
uint64_t first_n(const std::string& native) {
  // 2 varints (columns, rows < 128), "n", "UInt64", then the values.
  const size_t at = 2 + 1 + 1 + 1 + 6;
  uint64_t n = 0;
  std::memcpy(&n, native.data() + at, sizeof(n));
  return n;
}

TEST(BlockSendersTest, EveryBlockArrivesWholeAndTheCallerGetsAnEmptyOne) {
  std::mutex mu;
  std::multiset<std::string> got;
  std::set<size_t> connections_used;
  std::multiset<std::string> sent;
  {
    BlockSenders senders(
        3, [&](size_t c, const std::string& into, const std::vector<std::string_view>& pieces) {
          EXPECT_EQ(into, "db.t");
          EXPECT_LT(c, 3u);
          std::lock_guard lock(mu);
          got.insert(into + ":" + joined(pieces));
          connections_used.insert(c);
          return Status::Ok();
        });
    NativeBlock b = block_for(kTable);
    for (uint64_t i = 0; i < 40; ++i) {
      fill(&b, i * 10, 10 + i % 4);
      std::string bytes;
      ASSERT_TRUE(b.write(&bytes).ok());
      sent.insert("db.t:" + bytes);
      ASSERT_TRUE(senders.send(kTable, "db.t", &b).ok());
      // Taken: an empty block of the same columns, ready for the next rows.
      ASSERT_EQ(b.rows(), 0u);
      ASSERT_EQ(b.columns(), kTable.columns.size());
      EXPECT_EQ(b.column_name(2), "a");
    }
    ASSERT_TRUE(senders.finish().ok());
    std::lock_guard lock(mu);
    EXPECT_EQ(got, sent);
  }
  EXPECT_GE(connections_used.size(), 1u);
}

TEST(BlockSendersTest, AtMostConnectionsInsertsRunAndThatManyDo) {
  constexpr size_t kConnections = 3;
  std::mutex mu;
  std::condition_variable cv;
  size_t running = 0, most = 0;
  bool all_ran_at_once = false;
  BlockSenders senders(
      kConnections, [&](size_t, const std::string&, const std::vector<std::string_view>&) {
        std::unique_lock lock(mu);
        most = std::max(most, ++running);
        if (running == kConnections) all_ran_at_once = true;
        cv.notify_all();
        // Each insert waits (bounded) until all of them ran together once.
        cv.wait_for(lock, std::chrono::seconds(20), [&] { return all_ran_at_once; });
        --running;
        return Status::Ok();
      });
  NativeBlock b = block_for(kTable);
  for (uint64_t i = 0; i < 4 * kConnections; ++i) {
    fill(&b, i, 1);
    ASSERT_TRUE(senders.send(kTable, "t", &b).ok());
  }
  ASSERT_TRUE(senders.finish().ok());
  std::lock_guard lock(mu);
  EXPECT_TRUE(all_ran_at_once);
  EXPECT_EQ(most, kConnections);
}

TEST(BlockSendersTest, TheFirstErrorIsKeptAndNothingIsInsertedAfterIt) {
  // Block 0's insert fails only once a send() has returned block 1's error: that one came
  // first, and block 0's later refusal does not replace it.
  std::mutex mu;
  std::condition_variable cv;
  bool error_seen = false;
  std::vector<uint64_t> inserted;
  BlockSenders senders(
      2, [&](size_t, const std::string&, const std::vector<std::string_view>& pieces) {
        const uint64_t n = first_n(joined(pieces));
        std::unique_lock lock(mu);
        inserted.push_back(n);
        if (n == 1) return Status::IoError("block 1: connection reset (transient)");
        if (n == 0) {
          cv.wait_for(lock, std::chrono::seconds(20), [&] { return error_seen; });
          return Status::Invalid("block 0: refused");
        }
        return Status::Ok();
      });
  NativeBlock b = block_for(kTable);
  Status s;
  uint64_t sends = 0;
  for (uint64_t i = 0; i < 10 && s.ok(); ++i, ++sends) {
    fill(&b, i, 1);
    s = senders.send(kTable, "t", &b);
  }
  {
    std::lock_guard lock(mu);
    error_seen = true;
  }
  cv.notify_all();
  // A send after the error returns it and leaves the block with its rows.
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.message();
  EXPECT_NE(s.message().find("block 1"), std::string::npos) << s.message();
  EXPECT_EQ(b.rows(), 1u);
  Status f = senders.finish();
  EXPECT_EQ(f.code(), StatusCode::kIoError) << f.message();
  EXPECT_NE(f.message().find("block 1"), std::string::npos) << f.message();
  std::lock_guard lock(mu);
  // Blocks 0 and 1 were in flight together; the third waited for one of them, then got the
  // error: nothing else was inserted.
  EXPECT_EQ(std::set<uint64_t>(inserted.begin(), inserted.end()), (std::set<uint64_t>{0, 1}));
  EXPECT_EQ(sends, 3u);
}

TEST(BlockSendersTest, ARefusalFromTheOnlyConnectionStopsTheRest) {
  std::atomic<int> calls{0};
  BlockSenders senders(1, [&](size_t, const std::string&, const std::vector<std::string_view>&) {
    ++calls;
    return Status::Invalid("ClickHouse refused: 60: table does not exist");
  });
  NativeBlock b = block_for(kTable);
  fill(&b, 0, 5);
  ASSERT_TRUE(senders.send(kTable, "t", &b).ok());
  fill(&b, 5, 5);
  Status s = senders.send(kTable, "t", &b);  // waits for the first: its error
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_EQ(senders.finish().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(calls.load(), 1);
}

TEST(BlockSendersTest, AMalformedBlockIsRefusedBeforeItIsTaken) {
  std::atomic<int> calls{0};
  BlockSenders senders(2, [&](size_t, const std::string&, const std::vector<std::string_view>&) {
    ++calls;
    return Status::Ok();
  });
  NativeBlock b = block_for(kTable);
  b.put<uint64_t>(0, 1);
  b.end_row();  // columns s and a without a value
  Status s = senders.send(kTable, "t", &b);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a block of t"), std::string::npos) << s.message();
  EXPECT_EQ(b.rows(), 1u);
  EXPECT_TRUE(senders.finish().ok());  // nothing was sent: no insert failed
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace
}  // namespace nanotrace::ship
