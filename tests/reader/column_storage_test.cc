// ColumnArray's memory (column_storage.cc): values kept as a column grows from its small pages
// into huge blocks, rows written at once into a column reserved lazily, and the columns of a
// read starting at different offsets into a 4 KiB page (a reader fills a dozen row by row at
// once: at one offset they evicted each other's lines from the same cache sets).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "nanotrace/columns.hpp"

namespace nanotrace {
namespace {

TEST(ColumnStorageTest, GrowingPastTheSmallPagesKeepsEveryValue) {
  ColumnArray<uint64_t> column;
  const size_t rows = size_t{3} << 20;  // 24 MiB: past the small pages, several huge blocks
  for (size_t i = 0; i < rows; ++i) column.push_back(i * 3);
  ASSERT_EQ(column.size(), rows);
  for (size_t i = 0; i < rows; ++i) ASSERT_EQ(column[i], i * 3) << i;
}

TEST(ColumnStorageTest, RowsWrittenAnywhereInALazyReservation) {
  ColumnArray<uint32_t> column;
  const size_t rows = size_t{5} << 20;
  column.reserve_lazily(rows);
  ASSERT_GE(column.capacity(), rows);
  column.data()[rows - 1] = 7;  // far end first, as the second part of a split read does
  column.data()[0] = 5;
  column.resize(rows);
  EXPECT_EQ(column[0], 5u);
  EXPECT_EQ(column[rows / 2], 0u);  // never written: fresh memory
  EXPECT_EQ(column[rows - 1], 7u);
}

TEST(ColumnStorageTest, ColumnsMadeTogetherStartAtDifferentOffsetsIntoAPage) {
  std::vector<ColumnArray<uint64_t>> columns(8);
  std::set<uintptr_t> offsets;
  for (ColumnArray<uint64_t>& c : columns) {
    c.push_back(1);
    const auto at = reinterpret_cast<uintptr_t>(c.data());
    EXPECT_EQ(at % 64, 0u);  // whole cache lines (and numpy's alignment)
    offsets.insert(at % 4096);
  }
  EXPECT_EQ(offsets.size(), columns.size());
}

}  // namespace
}  // namespace nanotrace
