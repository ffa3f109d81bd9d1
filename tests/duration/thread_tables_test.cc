// Unit tests of each writer thread's own table of open operations (ThreadOpenTables): its
// thread opens and closes with plain stores, replaces its own open key, leaves a taken entry
// to the shared table, is closed by other threads (and stops taking begins when that is
// common), is read whole by the control thread, and, beside the shared OpenTable the way the
// runtime uses the two, loses no operation while threads close each other's.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "base/thread_open_tables.hpp"
#include "base/trigger_pairing.hpp"

namespace nanotrace::pairing {

// What a writer inside a begin leaves when a resume clears the tables between its load of
// the table's count of begins and its store of it: the count it read, plus one.
struct ThreadOpenTablesTesting {
  static void store_begun(ThreadOpenTables& tables, uint32_t t, uint64_t begun) {
    tables.tables_[t].begun.store(begun, std::memory_order_relaxed);
  }
};

namespace {

using Tables = ThreadOpenTables;

OpenOp own_op(uint64_t key, uint64_t ticks, uint32_t slot = 0, uint64_t seq = 0) {
  return {key, (ticks << 16) | 7, OpenOp::where_of(slot, seq), 4321};
}

size_t open_count(const Tables& tables) {
  size_t n = 0;
  tables.for_each([&](size_t, const OpenOp&) { ++n; });
  return n;
}

TEST(DurationThreadTablesTest, ItsThreadOpensAndClosesAKey) {
  Tables tables(4);
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(tables.capacity(), 0u);  // no table used yet
  OpenOp dropped, begun;
  EXPECT_EQ(tables.begin(2, own_op(9, 100, 2, 42), &dropped), Tables::Begin::kInserted);
  EXPECT_EQ(tables.used(), 3u);
  EXPECT_EQ(tables.capacity(), 3u * Tables::kEntries);
  EXPECT_FALSE(tables.end_own(2, 10, &begun));
  EXPECT_FALSE(tables.end_own(1, 9, &begun));  // another thread's own table holds nothing
  ASSERT_TRUE(tables.end_own(2, 9, &begun));
  EXPECT_EQ(begun.key, 9u);
  EXPECT_EQ(begun.begin_ticks(), 100u);
  EXPECT_EQ(begun.slot(), 2u);
  EXPECT_EQ(begun.seq(), 42u);
  EXPECT_EQ(begun.tid, 4321u);
  EXPECT_FALSE(tables.end_own(2, 9, &begun));  // closed once
  EXPECT_EQ(open_count(tables), 0u);
}

TEST(DurationThreadTablesTest, ABeginOfItsOwnOpenKeyReplacesIt) {
  Tables tables(1);
  OpenOp dropped, begun;
  ASSERT_EQ(tables.begin(0, own_op(5, 100), &dropped), Tables::Begin::kInserted);
  ASSERT_EQ(tables.begin(0, own_op(5, 200), &dropped), Tables::Begin::kReplaced);
  EXPECT_EQ(dropped.begin_ticks(), 100u);
  ASSERT_TRUE(tables.end_own(0, 5, &begun));
  EXPECT_EQ(begun.begin_ticks(), 200u);
}

TEST(DurationThreadTablesTest, AnEntryTakenByAnotherKeyLeavesTheBeginToTheSharedTable) {
  Tables tables(1);
  OpenOp dropped, begun;
  // 0x1ff folds onto 0's entry (0x1ff + 1).
  ASSERT_EQ(tables.begin(0, own_op(0, 100), &dropped), Tables::Begin::kInserted);
  EXPECT_EQ(tables.begin(0, own_op(0x1ff, 110), &dropped), Tables::Begin::kNotHere);
  EXPECT_FALSE(tables.end_own(0, 0x1ff, &begun));
  ASSERT_TRUE(tables.end_own(0, 0, &begun));
  EXPECT_EQ(tables.begin(0, own_op(0x1ff, 120), &dropped), Tables::Begin::kInserted);
}

// Request numbers from a counter, up to 200 in flight, never share an entry; pointers into
// an array of 64-byte or 4 KiB structures, 64 in flight, rarely.
TEST(DurationThreadTablesTest, KeysInFlightSpreadOverTheEntries) {
  struct Flow {
    uint64_t first, stride, in_flight;
  };
  for (const Flow flow : {Flow{0, 1, 200}, Flow{0xfff0, 1, 200}, Flow{0x7f1234560000, 64, 64},
                          Flow{0x7f1234560000, 4096, 64}}) {
    Tables tables(1);
    OpenOp dropped, begun;
    uint64_t elsewhere = 0;
    for (uint64_t i = 0; i < 100000; ++i) {
      const uint64_t key = flow.first + i * flow.stride;
      if (tables.begin(0, own_op(key, 1 + i), &dropped) == Tables::Begin::kNotHere) ++elsewhere;
      if (i >= flow.in_flight) tables.end_own(0, key - flow.in_flight * flow.stride, &begun);
    }
    if (flow.stride == 1) {
      EXPECT_EQ(elsewhere, 0u) << flow.first;
    } else {
      EXPECT_LT(elsewhere, 100000u / 20) << flow.stride;
    }
  }
}

TEST(DurationThreadTablesTest, AnotherThreadClosesAnOperationAndItsEntryIsFreeAgain) {
  Tables tables(2);
  OpenOp dropped, begun;
  ASSERT_EQ(tables.begin(0, own_op(3, 100), &dropped), Tables::Begin::kInserted);
  EXPECT_FALSE(tables.end_other(0, 3, &begun));  // the caller's own table is not looked at
  ASSERT_TRUE(tables.end_other(1, 3, &begun));
  EXPECT_EQ(begun.begin_ticks(), 100u);
  EXPECT_FALSE(tables.end_other(1, 3, &begun));  // closed once
  EXPECT_FALSE(tables.end_own(0, 3, &begun));    // the owner finds it closed
  EXPECT_EQ(open_count(tables), 0u);
  // The owner takes the entry again, and that operation is open.
  ASSERT_EQ(tables.begin(0, own_op(3, 200), &dropped), Tables::Begin::kInserted);
  EXPECT_EQ(open_count(tables), 1u);
  ASSERT_TRUE(tables.end_own(0, 3, &begun));
  EXPECT_EQ(begun.begin_ticks(), 200u);
  // A thread beyond the tables (its slot has none) closes in them too.
  ASSERT_EQ(tables.begin(1, own_op(4, 300), &dropped), Tables::Begin::kInserted);
  ASSERT_TRUE(tables.end_other(5000, 4, &begun));
}

TEST(DurationThreadTablesTest, ATableWhoseOperationsOftenEndElsewhereTakesNoMoreBegins) {
  Tables tables(2);
  OpenOp dropped, begun;
  uint64_t key = 0;
  for (; key < 100; ++key) {
    if (tables.begin(0, own_op(key, 100 + key), &dropped) == Tables::Begin::kNotHere) break;
    ASSERT_TRUE(tables.end_other(1, key, &begun));
  }
  EXPECT_LE(key, 8u);  // after a few
  EXPECT_EQ(tables.begin(0, own_op(key + 1, 200), &dropped), Tables::Begin::kNotHere);
  // Rarely: the table stays in use.
  Tables rarely(2);
  for (key = 0; key < 1000; ++key) {
    ASSERT_EQ(rarely.begin(0, own_op(key, 100 + key), &dropped), Tables::Begin::kInserted);
    if (key % 16 == 0) {
      ASSERT_TRUE(rarely.end_other(1, key, &begun));
    } else {
      ASSERT_TRUE(rarely.end_own(0, key, &begun));
    }
  }
}

TEST(DurationThreadTablesTest, TheControlThreadReadsAndMarksEveryOpenOperation) {
  Tables tables(3);
  OpenOp dropped, begun;
  tables.begin(0, own_op(1, 100, 0, 1), &dropped);
  tables.begin(2, own_op(2, 200, 2, 1), &dropped);
  std::vector<size_t> indexes;
  tables.for_each([&](size_t index, const OpenOp&) { indexes.push_back(index); });
  ASSERT_EQ(indexes.size(), 2u);
  EXPECT_LT(indexes[0], Tables::kEntries);
  EXPECT_GE(indexes[1], 2u * Tables::kEntries);
  OpenOp seen;
  ASSERT_TRUE(tables.get(indexes[1], &seen));
  EXPECT_EQ(seen.key, 2u);
  EXPECT_TRUE(tables.mark_reported(indexes[1], seen));
  EXPECT_FALSE(tables.mark_reported(indexes[1], seen));  // marked once
  ASSERT_TRUE(tables.get(indexes[1], &seen));
  EXPECT_TRUE(seen.reported());
  // Once closed, its entry is not read as open; a later operation there is another one.
  ASSERT_TRUE(tables.end_own(2, 2, &begun));
  EXPECT_TRUE(begun.reported());
  EXPECT_FALSE(tables.get(indexes[1], &seen));
  tables.begin(2, own_op(2, 300, 2, 2), &dropped);
  ASSERT_TRUE(tables.get(indexes[1], &seen));
  EXPECT_FALSE(seen.reported());
  EXPECT_FALSE(tables.mark_reported(indexes[1], own_op(2, 200, 2, 1)));
  tables.clear();
  EXPECT_EQ(open_count(tables), 0u);
  EXPECT_EQ(tables.begin(0, own_op(1, 400), &dropped), Tables::Begin::kInserted);
}

// A resume clears the tables while a writer of the round before may still be in a begin
// (descheduled between its trigger check and its table's stores): the count of begins it
// read before the clear is stored after it. Its table must still be read by the control
// thread's scans (else its stuck operations are never named) and probed by the other threads'
// ends.
TEST(DurationThreadTablesTest, ATableClearedWhileItsThreadIsInABeginIsStillRead) {
  Tables tables(2);
  OpenOp dropped, begun;
  ASSERT_EQ(tables.begin(1, own_op(5, 100, 1, 1), &dropped), Tables::Begin::kInserted);
  tables.clear();
  ThreadOpenTablesTesting::store_begun(tables, 1, 2);  // the straddling begin's count
  EXPECT_EQ(open_count(tables), 0u);
  ASSERT_EQ(tables.begin(1, own_op(6, 200, 1, 2), &dropped), Tables::Begin::kInserted);
  std::vector<uint64_t> keys;
  tables.for_each([&](size_t, const OpenOp& op) { keys.push_back(op.key); });
  EXPECT_EQ(keys, std::vector<uint64_t>{6});
  ASSERT_TRUE(tables.end_other(0, 6, &begun));
  EXPECT_EQ(begun.begin_ticks(), 200u);
  // Cleared again, the table is still read.
  tables.clear();
  ASSERT_EQ(tables.begin(1, own_op(7, 300, 1, 3), &dropped), Tables::Begin::kInserted);
  EXPECT_EQ(open_count(tables), 1u);
}

TEST(DurationThreadTablesTest, ReleasedPagesReadAsEmptyTables) {
  Tables tables(1);
  OpenOp dropped, begun;
  tables.begin(0, own_op(7, 100), &dropped);
  tables.release_pages();
  EXPECT_FALSE(tables.end_own(0, 7, &begun));
  EXPECT_FALSE(tables.end_other(1, 7, &begun));
  EXPECT_EQ(tables.begin(0, own_op(7, 100), &dropped), Tables::Begin::kInserted);
}

// The runtime's way: own table first, else the shared one; an end looks in its own table,
// then the shared one, then the others'. Two threads begin; each ends most of its own
// operations and hands one in sixteen to a third thread, while a fourth reads every table
// the whole time (each copy consistent). Every operation is closed exactly once or counted.
TEST(DurationThreadTablesTest, BesideTheSharedTableThreadsLoseNoOperation) {
  constexpr uint32_t kBeginners = 2;
  constexpr uint32_t kEnder = kBeginners;  // the third thread's number
  constexpr uint64_t kOps = 200000;
  constexpr uint64_t kInFlight = 8;
  Tables tables(kBeginners + 1);
  OpenTable shared(4096);
  std::atomic<uint64_t> closed{0}, unseen_begins{0}, dropped_begins{0}, unseen_ends{0},
      unmatched{0};
  std::mutex mu;
  std::vector<uint64_t> handed;
  std::atomic<uint32_t> beginners_done{0};
  // At most 64 handed over and not yet ended (the third thread may get the CPU less often than
  // the others): the shared table's bounds are not what this tests.
  std::atomic<uint64_t> waiting{0};
  std::atomic<bool> stop_reading{false};
  auto key_of = [](uint64_t t, uint64_t i) { return (t << 40) | i; };
  auto handed_over = [](uint64_t i) { return i % 16 == 0; };

  auto end = [&](uint32_t t, uint64_t key) {
    OpenOp begun;
    if (tables.end_own(t, key, &begun)) {
      closed.fetch_add(1);
      return;
    }
    switch (shared.end(key, &begun)) {
      case OpenTable::End::kMatched:
        closed.fetch_add(1);
        return;
      case OpenTable::End::kBusy:  // not known to be there: perhaps elsewhere
        (tables.end_other(t, key, &begun) ? closed : unseen_ends).fetch_add(1);
        return;
      case OpenTable::End::kUnmatched:
        (tables.end_other(t, key, &begun) ? closed : unmatched).fetch_add(1);
        return;
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kBeginners; ++t) {
    threads.emplace_back([&, t] {
      OpenOp dropped;
      for (uint64_t i = 0; i < kOps; ++i) {
        const OpenOp o = own_op(key_of(t, i), 1 + i, t, i);
        if (handed_over(i)) {
          while (waiting.load() >= 64) std::this_thread::yield();
        }
        if (tables.begin(t, o, &dropped) == Tables::Begin::kNotHere) {
          switch (shared.begin(o, &dropped)) {
            case OpenTable::Begin::kBusy:
              unseen_begins.fetch_add(1);  // its end is unmatched
              break;
            case OpenTable::Begin::kEvicted:  // a bucket full: the dropped one's end is unmatched
            case OpenTable::Begin::kReplaced:
              dropped_begins.fetch_add(1);
              break;
            case OpenTable::Begin::kInserted:
              break;
          }
        }
        if (handed_over(i)) {
          waiting.fetch_add(1);
          std::lock_guard lock(mu);
          handed.push_back(o.key);
        }
        if (i >= kInFlight && !handed_over(i - kInFlight)) end(t, key_of(t, i - kInFlight));
      }
      for (uint64_t i = kOps - kInFlight; i < kOps; ++i) {
        if (!handed_over(i)) end(t, key_of(t, i));
      }
      beginners_done.fetch_add(1);
    });
  }
  threads.emplace_back([&] {
    for (;;) {
      const bool last = beginners_done.load() == kBeginners;
      std::vector<uint64_t> keys;
      {
        std::lock_guard lock(mu);
        keys.swap(handed);
      }
      for (uint64_t key : keys) end(kEnder, key);
      waiting.fetch_sub(keys.size());
      if (last && keys.empty()) break;
    }
  });
  std::atomic<uint64_t> inconsistent{0};
  std::thread reader([&] {
    while (!stop_reading.load()) {
      tables.for_each([&](size_t, const OpenOp& o) {
        if (o.slot() != (o.key >> 40) || o.seq() != (o.key & 0xffffffffff) ||
            o.begin_ticks() != 1 + o.seq()) {
          inconsistent.fetch_add(1);
        }
      });
    }
  });
  for (auto& th : threads) th.join();
  stop_reading.store(true);
  reader.join();
  EXPECT_EQ(inconsistent.load(), 0u);
  EXPECT_EQ(closed.load() + unseen_begins.load() + dropped_begins.load() + unseen_ends.load(),
            kBeginners * kOps);
  EXPECT_EQ(unmatched.load(), unseen_begins.load() + dropped_begins.load());
  EXPECT_EQ(open_count(tables), 0u);
  size_t shared_open = 0;
  shared.for_each([&](size_t, const OpenOp&) { ++shared_open; });
  EXPECT_EQ(shared_open, unseen_ends.load());  // an end that gave up leaves its begin open
  EXPECT_LT(unseen_begins.load() + dropped_begins.load() + unseen_ends.load(),
            kBeginners * kOps / 1000);
}

}  // namespace
}  // namespace nanotrace::pairing
