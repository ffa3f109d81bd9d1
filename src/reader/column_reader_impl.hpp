// ColumnReader::Impl, the column reader's state, shared by the two files that make it:
// columns.cc (the merge of the thread streams into the batch's columns) and column_tables.cc
// (the tables of the selected events, and each layout's decoding plan). Internal header.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nanotrace/columns.hpp"
#include "reader/column_cursor.hpp"
#include "reader/column_split.hpp"

namespace nanotrace {

struct ColumnReader::Impl {
  // How take() walks a record of a table's layout: stretches of scalars, each but the last
  // followed by a string (whose length moves what follows). A Store is a scalar read: its
  // column and its offset in the stretch.
  struct Store {
    uint16_t column;
    uint16_t offset;
  };
  struct Run {
    uint16_t first_store = 0, stores = 0;  // into Table::stores
    uint16_t scalar_bytes = 0;
    bool string = false;     // a string follows the scalars
    int string_column = -1;  // its column, -1: not read
  };
  struct Table {
    std::string name;
    uint32_t name_code;
    std::vector<uint16_t> ids;
    const EventInfo* layout;
    std::vector<Run> runs;        // up to the last field read or walked
    std::vector<Store> stores;    // the runs' scalars read
    int columns = 0;              // fields read
    std::vector<int> dictionary;  // per column read: index into dictionaries, -1: no string
    size_t string_runs = 0;       // runs up to the last string column read (0: none)
  };

  // The codes of a dictionary's recent short texts: a text of up to 7 bytes is, with its
  // length byte, one word of its record (its slot has 8 bytes at least), so a row whose text
  // was met lately finds its code with one load and one compare, without a lookup.
  struct RecentCodes {
    static constexpr size_t kSlots = 32;
    std::array<uint64_t, kSlots> word{};
    std::array<uint32_t, kSlots> code_plus_one{};  // 0: empty
  };

  Impl(Trace& t, ColumnOptions o)
      : trace(t),
        sizer(t),
        options(std::move(o)),
        event_names(std::make_shared<StringDictionary>()) {}

  // column_tables.cc: the tables of the selected events, and the batch's.
  void make_tables();
  Table make_table(const EventInfo& e);
  int dictionary_index(const std::string& field);
  bool wanted(const std::string& field) const;
  void reset(ColumnSet* batch);

  // Where take() writes a table's rows: its columns' memory, written past their sizes (set
  // once per batch, by finish_columns), so a row costs stores, and one check of its room.
  // Pointers only: a value stored through them cannot change them (no reloads).
  struct Sink {
    uint64_t* time_ns = nullptr;
    uint64_t* seq = nullptr;
    uint32_t* thread = nullptr;
    uint16_t* event = nullptr;  // null: the table holds one id
    uint64_t* order = nullptr;  // null: no row order
    // Per column: its bits, or a string's codes and dictionary. Arrays, not vectors: take()
    // reaches a column's memory with one load.
    std::array<uint64_t*, abi::kMaxFields> words{};
    std::array<uint32_t*, abi::kMaxFields> codes{};
    std::array<StringDictionary*, abi::kMaxFields> dictionary{};
    std::array<RecentCodes*, abi::kMaxFields> recent{};
    size_t rows = 0;  // in this batch
    size_t room = 0;  // rows the columns hold without growing
  };

  // columns.cc: the merge. Defined inline there, as they were in the class: take() and what
  // it calls are the cost of every row.
  void start();
  void aim(size_t k, EventTable& t, size_t rows);
  void finish_columns(ColumnSet* out);
  void read(ColumnSet* out, size_t max_rows);
  void report_threads(ColumnSet* out);
  bool extend_first_part(uint64_t best_ticks);
  bool run(reader::ColumnCursor& c, uint32_t thread, uint64_t bound_ticks, uint32_t bound,
           uint64_t max_rows, uint64_t* rows_io, ColumnSet* out);
  void take(size_t k, const uint8_t* rec, uint16_t id, uint64_t ticks, uint64_t seq,
            uint32_t thread, uint64_t pos, ColumnSet* out);
  [[gnu::noinline]] static void take_strings(const Sink& s, const Table& layout, const uint8_t* rec,
                                             size_t r);
  static uint32_t code_of(StringDictionary& dictionary, RecentCodes& recent, const uint8_t* p,
                          uint32_t n);

  // columns.cc too: a split read's second part placed after the first's rows, and a later
  // part's strings and codes taken into this part's (read_split).
  void place_second_part();
  static uint64_t adapt_step(uint64_t step, uint64_t bytes, uint64_t target);
  void take_strings_of(const Impl& other, const std::vector<uint64_t>& from,
                       const std::vector<uint64_t>& upto, ColumnSet* out);

  Trace& trace;
  reader::RecordSizer sizer;
  ColumnOptions options;
  std::vector<Table> tables;
  std::vector<int> table_of;  // by event id: index into tables, -1 if not read
  std::shared_ptr<StringDictionary> event_names;
  // Of the string columns, one per field name.
  std::vector<std::shared_ptr<StringDictionary>> dictionaries;
  std::vector<RecentCodes> recent;  // by dictionary
  std::map<std::string, int> dictionary_of;
  std::vector<Sink> sinks;  // per table
  std::vector<reader::ColumnCursor> cursors;
  std::vector<uint32_t> live;  // cursors with a record left, in index order
  uint64_t position = 0;       // rows handed out so far (of the read, for a part)
  uint64_t consumed = 0;       // bytes of the records merged

  // A split read (column_split.hpp): this reader's part, and the boundary both parts share.
  static constexpr int kWhole = 0, kFirstPart = 1, kSecondPart = 2;
  int part = kWhole;
  std::shared_ptr<reader::SplitBoundary> split;
  reader::SplitBound end{0, true};    // where this part's records end (the first part's promise)
  bool placed = false;                // the second part: counted the first part's rows
  std::vector<uint64_t> rows_before;  // per table: the rows of the parts before this one
  uint64_t promise_step = kFirstStep;
  uint64_t consumed_at_promise = 0;
  // Clock values the first part's promise and the second part's count advance by, scaled to
  // cover about kPromiseBytes and kCountBytes of records.
  static constexpr uint64_t kFirstStep = uint64_t{1} << 16, kMaxStep = uint64_t{1} << 44;
  static constexpr uint64_t kPromiseBytes = 16u << 20, kCountBytes = 4u << 20;
};

}  // namespace nanotrace
