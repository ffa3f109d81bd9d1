// ColumnReader and read_columns: the thread streams' raw record spans merged by time exactly
// as MergedSource merges decoded records (smallest clock value first, ties by thread index),
// each record decoded straight into its table's columns. No Record is filled: a row costs a
// few appends. The merge stops wherever a batch is full and goes on from there.
//
// The merge keeps taking records from one thread for as long as they come before every other
// thread's next record, so it compares clock values once per record and rescans the threads
// only where their records interleave.
//
// A reader can be one of two parts of a split read (column_split.hpp, column_parts.cc): the
// first stops each stream at the cut, the second counts the first's rows up to it, then reads
// on from there.
#include "nanotrace/columns.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "reader/column_cursor.hpp"
#include "reader/column_split.hpp"
#include "reader/record_walk.hpp"

namespace nanotrace {
namespace {

using reader::checked_size;
using reader::load_u64;
using reader::SplitBound;

bool selected(const std::vector<std::string>& filters, const EventInfo& e) {
  if (filters.empty()) return true;
  for (const std::string& f : filters) {
    if (f == e.group || f == e.full_name()) return true;
  }
  return false;
}

}  // namespace

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

  // Tables for the selected events: one per (full name, field names and types).
  void make_tables() {
    const std::vector<EventInfo>& events = trace.events();
    uint32_t max_id = 0;
    for (const EventInfo& e : events) max_id = e.id > max_id ? e.id : max_id;
    table_of.assign(max_id + 1, -1);
    using Layout = std::tuple<std::string, std::vector<std::string>, std::vector<uint8_t>>;
    std::map<Layout, int> index;
    for (const EventInfo& e : events) {
      if (e.is_guard || e.id == 0 || trace.event_by_id(e.id) != &e) continue;
      if (!selected(options.events, e)) continue;
      std::vector<std::string> names;
      std::vector<uint8_t> types;
      for (const FieldInfo& f : e.fields) {
        names.push_back(f.name);
        types.push_back(static_cast<uint8_t>(f.type));
      }
      Layout layout(e.full_name(), std::move(names), std::move(types));
      auto [it, inserted] = index.try_emplace(std::move(layout), static_cast<int>(tables.size()));
      if (inserted) tables.push_back(make_table(e));
      tables[static_cast<size_t>(it->second)].name_code = event_names->code_of(e.full_name());
      tables[static_cast<size_t>(it->second)].ids.push_back(e.id);
      table_of[e.id] = it->second;
    }
  }

  // How take() decodes a record of e's layout: the fields up to the last one read or
  // walked (a string: its length moves what follows), then scalars stepped over at once.
  Table make_table(const EventInfo& e) {
    Table t{e.full_name(), 0, {}, &e, {}, {}, 0, {}, 0};
    Run run;
    size_t walked_runs = 0;  // runs up to the last field read or walked
    for (size_t i = 0; i < e.fields.size(); ++i) {
      const FieldInfo& f = e.fields[i];
      const bool read = wanted(f.name);
      const int column = read ? t.columns++ : -1;
      if (f.type != abi::FieldType::kString) {
        if (read) {
          t.stores.push_back({static_cast<uint16_t>(column), run.scalar_bytes});
          ++run.stores;
          walked_runs = t.runs.size() + 1;
        }
        run.scalar_bytes = static_cast<uint16_t>(run.scalar_bytes + 8);
        if (read) t.dictionary.push_back(-1);
        continue;
      }
      if (read) t.dictionary.push_back(dictionary_index(f.name));
      run.string = true;
      run.string_column = column;
      t.runs.push_back(run);
      walked_runs = t.runs.size();
      if (read) t.string_runs = t.runs.size();
      run = Run{};
      run.first_store = static_cast<uint16_t>(t.stores.size());
    }
    t.runs.push_back(run);
    t.runs.resize(walked_runs);
    return t;
  }

  // The dictionary of the string columns named `field`.
  int dictionary_index(const std::string& field) {
    auto [it, inserted] = dictionary_of.try_emplace(field, static_cast<int>(dictionaries.size()));
    if (inserted) {
      dictionaries.push_back(std::make_shared<StringDictionary>());
      recent.emplace_back();
    }
    return it->second;
  }

  bool wanted(const std::string& field) const {
    if (options.fields.empty()) return true;
    for (const std::string& f : options.fields) {
      if (f == field) return true;
    }
    return false;
  }

  void start() {
    std::vector<std::unique_ptr<SpanSource>> sources = trace.read_spans();
    cursors.resize(sources.size());
    for (uint32_t i = 0; i < sources.size(); ++i) {
      cursors[i].set(std::move(sources[i]), sizer);
      if (cursors[i].load()) live.push_back(i);
    }
  }

  // Empties batch's columns, keeping their memory; lays its tables out on first use.
  void reset(ColumnSet* batch) {
    if (batch->tables.size() != tables.size()) {
      batch->tables.clear();
      for (const Table& t : tables) {
        EventTable out;
        out.name = t.name;
        out.name_code = t.name_code;
        out.ids = t.ids;
        for (const FieldInfo& f : t.layout->fields) {
          if (!wanted(f.name)) continue;
          FieldColumn c;
          c.info = f;
          out.fields.push_back(std::move(c));
        }
        batch->tables.push_back(std::move(out));
      }
    }
    // A dictionary past its bound starts again, as a new one: the batches before keep theirs.
    const size_t bound = options.max_dictionary_entries;
    for (size_t d = 0; d < dictionaries.size(); ++d) {
      if (bound == 0 || dictionaries[d]->size() <= bound) continue;
      dictionaries[d] = std::make_shared<StringDictionary>();
      recent[d] = RecentCodes{};
    }
    batch->event_names = event_names;
    for (EventTable& t : batch->tables) {
      t.time_ns.clear();
      t.seq.clear();
      t.thread.clear();
      t.event.clear();
      t.order.clear();
    }
    for (size_t k = 0; k < tables.size(); ++k) {
      std::vector<FieldColumn>& fields = batch->tables[k].fields;
      for (size_t j = 0; j < fields.size(); ++j) {
        fields[j].bits.clear();
        fields[j].codes.clear();
        const int d = tables[k].dictionary[j];
        if (d >= 0) fields[j].dictionary = dictionaries[static_cast<size_t>(d)];
      }
    }
    batch->gaps.clear();
    batch->rows = 0;
  }

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

  // Points t's sink at its columns, with room for at least `rows` rows.
  void aim(size_t k, EventTable& t, size_t rows) {
    Sink& s = sinks[k];
    const bool many = t.ids.size() > 1;
    t.time_ns.reserve(rows);
    t.seq.reserve(rows);
    t.thread.reserve(rows);
    if (many) t.event.reserve(rows);
    if (options.row_order) t.order.reserve(rows);
    size_t room = std::min({t.time_ns.capacity(), t.seq.capacity(), t.thread.capacity()});
    if (many) room = std::min(room, t.event.capacity());
    if (options.row_order) room = std::min(room, t.order.capacity());
    s.time_ns = t.time_ns.data();
    s.seq = t.seq.data();
    s.thread = t.thread.data();
    s.event = many ? t.event.data() : nullptr;
    s.order = options.row_order ? t.order.data() : nullptr;
    for (size_t j = 0; j < t.fields.size(); ++j) {
      FieldColumn& f = t.fields[j];
      if (f.is_string()) {
        f.codes.reserve(rows);
        room = std::min(room, f.codes.capacity());
        s.codes[j] = f.codes.data();
        const auto d = static_cast<size_t>(tables[k].dictionary[j]);
        s.dictionary[j] = dictionaries[d].get();
        s.recent[j] = &recent[d];
      } else {
        f.bits.reserve(rows);
        room = std::min(room, f.bits.capacity());
        s.words[j] = f.bits.data();
      }
    }
    s.room = room;
  }

  // Sets the sizes of the columns the sinks wrote.
  void finish_columns(ColumnSet* out) {
    for (size_t k = 0; k < sinks.size(); ++k) {
      EventTable& t = out->tables[k];
      const size_t rows = sinks[k].rows;
      t.time_ns.resize(rows);
      t.seq.resize(rows);
      t.thread.resize(rows);
      if (t.ids.size() > 1) t.event.resize(rows);
      if (options.row_order) t.order.resize(rows);
      for (FieldColumn& f : t.fields) {
        if (f.is_string()) {
          f.codes.resize(rows);
        } else {
          f.bits.resize(rows);
        }
      }
    }
  }

  void read(ColumnSet* out, size_t max_rows) {
    if (part == kSecondPart && !placed) place_second_part();
    sinks.resize(out->tables.size());
    for (size_t k = 0; k < sinks.size(); ++k) {
      sinks[k].rows = 0;
      aim(k, out->tables[k], 0);
    }
    uint64_t rows = 0;
    while (!live.empty() && rows < max_rows) {
      // The thread whose next record comes first, and the one after it, in one pass: live is
      // in index order, so on equal clock values the one met first (lower index) stays ahead.
      size_t best = 0;
      uint64_t best_ticks = cursors[live[0]].ticks;
      uint64_t bound_ticks = ~uint64_t{0};
      uint32_t bound = ~uint32_t{0};
      for (size_t j = 1; j < live.size(); ++j) {
        const uint64_t t = cursors[live[j]].ticks;
        if (t < best_ticks) {
          bound_ticks = best_ticks;
          bound = live[best];
          best_ticks = t;
          best = j;
        } else if (t < bound_ticks) {
          bound_ticks = t;
          bound = live[j];
        }
      }
      if (!end.open) {  // the first part of a split read: its records lie before `end`
        if (!end.before(best_ticks)) {
          if (extend_first_part(best_ticks)) continue;
          live.clear();  // at the cut
          break;
        }
        if (end.ticks - 1 < bound_ticks) {
          bound_ticks = end.ticks - 1;
          bound = ~uint32_t{0};
        }
      }
      const uint32_t b = live[best];
      if (!run(cursors[b], b, bound_ticks, bound, max_rows, &rows, out)) {
        live.erase(live.begin() + static_cast<ptrdiff_t>(best));
      }
    }
    if (part == kFirstPart) {
      split->set_first_bytes(consumed);
      if (live.empty()) split->first_ended();  // no-op once the cut is chosen
    }
    finish_columns(out);
    out->rows = rows;
    report_threads(out);
  }

  // The thread streams' statistics and the losses so far.
  void report_threads(ColumnSet* out) {
    out->threads.clear();
    out->thread_pid.clear();
    out->lost = 0;  // every process's no-slot and reclaimed losses, as TraceStats::lost
    for (const ProcessInfo& q : trace.processes()) out->lost += q.lost_no_slot + q.lost_reclaimed;
    out->corrupt_blocks = 0;
    for (reader::ColumnCursor& cur : cursors) {
      const ThreadStats& s = cur.source->stats();
      out->threads.push_back(s);
      // Its own process's pid (a trace of several processes: `run`, `merge`).
      out->thread_pid.push_back(s.info.pid != 0 ? s.info.pid : trace.process().pid);
      out->lost += s.lost();
      out->corrupt_blocks += s.corrupt_blocks;
    }
  }

  // The first part of a split read, whose streams all stand at or past its bound (best_ticks
  // is the earliest): extends the promise by about kPromiseBytes of records. False at the cut.
  bool extend_first_part(uint64_t best_ticks) {
    promise_step = adapt_step(promise_step, consumed - consumed_at_promise, kPromiseBytes);
    consumed_at_promise = consumed;
    end = split->extend(SplitBound{best_ticks + promise_step, best_ticks > ~promise_step});
    return end.before(best_ticks);
  }

  // The second part of a split read: walks the streams to the cut, counting the first part's
  // rows of each table, in steps of about kCountBytes; chooses the cut (SplitBoundary::choose)
  // where the first part has as much left to read as this one.
  void place_second_part() {
    placed = true;
    rows_before.assign(tables.size(), 0);
    uint64_t walked = 0, step = kFirstStep;
    SplitBound cut{0, true};
    if (split->chosen(&cut)) {  // given beforehand, or the first part read everything already
      reader::count_rows_before(cursors, &live, table_of, cut, &rows_before);
      for (uint64_t n : rows_before) position += n;
      return;
    }
    while (!live.empty()) {
      uint64_t from = ~uint64_t{0};
      for (uint32_t i : live) from = std::min(from, cursors[i].ticks);
      const SplitBound to{from + step, from > ~step};
      const uint64_t walked_now =
          reader::count_rows_before(cursors, &live, table_of, to, &rows_before);
      walked += walked_now;
      step = adapt_step(step, walked_now, kCountBytes);
      if (2 * walked >= split->total_bytes() + split->first_bytes()) {
        cut = to;
        break;
      }
    }
    // The cut lies at the count, or further: at the first part's promise, or at the end if the
    // first part read everything already.
    cut = split->choose(live.empty() ? SplitBound{0, true} : cut);
    reader::count_rows_before(cursors, &live, table_of, cut, &rows_before);
    for (uint64_t n : rows_before) position += n;
  }

  // read_columns() in parts: the strings of a later part's dictionaries (other's) added to
  // this reader's, and that part's codes (per table, rows [from, upto)) translated.
  void take_strings_of(const Impl& other, const std::vector<uint64_t>& from,
                       const std::vector<uint64_t>& upto, ColumnSet* out) {
    std::vector<std::vector<uint32_t>> code(dictionaries.size());
    std::vector<bool> same(dictionaries.size(), true);
    for (size_t d = 0; d < dictionaries.size(); ++d) {
      const StringDictionary& theirs = *other.dictionaries[d];
      code[d].resize(theirs.size());
      for (uint32_t c = 0; c < theirs.size(); ++c) {
        code[d][c] = dictionaries[d]->code_of(theirs[c]);
        same[d] = same[d] && code[d][c] == c;
      }
    }
    for (size_t k = 0; k < tables.size(); ++k) {
      for (size_t j = 0; j < tables[k].dictionary.size(); ++j) {
        const int d = tables[k].dictionary[j];
        if (d < 0 || same[static_cast<size_t>(d)]) continue;
        const uint32_t* to = code[static_cast<size_t>(d)].data();
        uint32_t* codes = out->tables[k].fields[j].codes.data();
        for (uint64_t r = from[k]; r < upto[k]; ++r) codes[r] = to[codes[r]];
      }
    }
  }

  // A step of clock values that covered `bytes` of records, scaled towards `target` bytes.
  static uint64_t adapt_step(uint64_t step, uint64_t bytes, uint64_t target) {
    if (bytes < target / 2) return std::min(step * 4, kMaxStep);
    if (bytes > target * 2) return std::max(step / 2, kFirstStep);
    return step;
  }

  // Takes thread's records for as long as they come before (bound_ticks, bound) and the
  // batch has room; false once the thread has none left. The cursor's state is kept in
  // locals meanwhile: the values stored into columns could otherwise alias it.
  bool run(reader::ColumnCursor& c, uint32_t thread, uint64_t bound_ticks, uint32_t bound,
           uint64_t max_rows, uint64_t* rows_io, ColumnSet* out) {
    uint64_t rows = *rows_io;
    uint64_t pos = position;
    bool more = true;
    const reader::RecordSizer& check = *c.sizer;
    // A plain pointer: a vector's would be loaded again after each store into a column.
    const int* const table_of_data = table_of.data();
    const size_t table_count = table_of.size();
    for (;;) {
      const uint8_t* data = c.span.data;
      const uint32_t bytes = c.span.bytes;
      const uint64_t base_ticks = c.span.base_ticks;
      uint32_t off = c.offset;
      uint32_t size = c.size;
      uint64_t seq = c.seq;
      uint64_t ticks = c.ticks;
      if (off == 0 && seq > c.expected_seq) {
        out->gaps.push_back({pos, thread, seq - c.expected_seq});
      }
      const uint32_t first_off = off;
      bool stop = false;
      for (;;) {
        // Each record's address depends on the previous one's size: fetch ahead (a prefetch
        // past the end of the block is harmless).
        __builtin_prefetch(data + off + 512);
        const uint8_t* rec = data + off;
        const uint16_t id = static_cast<uint16_t>(load_u64(rec) & 0xffff);
        const int k = id < table_count ? table_of_data[id] : -1;
        if (k >= 0) {
          take(static_cast<size_t>(k), rec, id, ticks, seq, thread, pos, out);
          ++pos;
          ++rows;
        }
        off += size;
        ++seq;
        size = checked_size(check, data, off, bytes);
        if (size == 0) break;
        ticks = abi::expand_ticks(base_ticks, load_u64(data + off) >> 16);
        if (rows >= max_rows || ticks > bound_ticks || (ticks == bound_ticks && thread > bound)) {
          stop = true;
          break;
        }
      }
      consumed += off - first_off;
      c.offset = off;
      c.size = size;
      c.seq = seq;
      c.ticks = ticks;
      if (stop) break;
      if (!c.load()) {
        more = false;
        break;
      }
      if (rows >= max_rows || c.ticks > bound_ticks || (c.ticks == bound_ticks && thread > bound)) {
        break;
      }
    }
    position = pos;
    *rows_io = rows;
    return more;
  }

  // Decodes the record at rec (of table k's layout, its size checked) into the table's next
  // row.
  void take(size_t k, const uint8_t* rec, uint16_t id, uint64_t ticks, uint64_t seq,
            uint32_t thread, uint64_t pos, ColumnSet* out) {
    Sink* s = &sinks[k];
    if (s->rows == s->room) {
      aim(k, out->tables[k], std::max<size_t>(2 * s->rows, 1024));
    }
    // The sink's pointers in locals first: a uint64_t stored could be its row count.
    const size_t r = s->rows;
    uint64_t* const time_ns = s->time_ns;
    uint64_t* const seqs = s->seq;
    uint32_t* const threads = s->thread;
    uint16_t* const event = s->event;
    uint64_t* const order = s->order;
    s->rows = r + 1;
    time_ns[r] = trace.ticks_to_ns(ticks);
    seqs[r] = seq;
    threads[r] = thread;
    if (event != nullptr) event[r] = id;
    if (order != nullptr) order[r] = pos;
    const Table& layout = tables[k];
    const uint8_t* p = rec + 8;
    const Store* const stores = layout.stores.data();
    uint64_t* const* const words = s->words.data();
    for (const Run& run : layout.runs) {
      for (uint32_t i = run.first_store; i < run.first_store + run.stores; ++i) {
        words[stores[i].column][r] = load_u64(p + stores[i].offset);
      }
      p += run.scalar_bytes;
      if (run.string) p += abi::string_slot_bytes(p[0]);
    }
    if (layout.string_runs != 0) take_strings(*s, layout, rec, r);
  }

  // The string columns of take()'s row r, coded. Kept out of take() and out of line: with the
  // dictionary's call inside take()'s walk over the fields, the compiler saved and restored
  // the caller's registers around that loop for every record, string column read or not
  // (8 % more instructions a record for `latency`; inlined into take(), still 5 % more than
  // here).
  [[gnu::noinline]] static void take_strings(const Sink& s, const Table& layout, const uint8_t* rec,
                                             size_t r) {
    const uint8_t* p = rec + 8;
    for (size_t i = 0; i < layout.string_runs; ++i) {
      const Run& run = layout.runs[i];
      p += run.scalar_bytes;
      const uint32_t n = p[0];
      if (run.string_column >= 0) {
        const auto c = static_cast<size_t>(run.string_column);
        s.codes[c][r] = code_of(*s.dictionary[c], *s.recent[c], p, n);
      }
      p += abi::string_slot_bytes(n);
    }
  }

  // The code of the text of n bytes whose length byte is at p.
  static uint32_t code_of(StringDictionary& dictionary, RecentCodes& recent, const uint8_t* p,
                          uint32_t n) {
    if (n >= 8)
      return dictionary.code_of(std::string_view(reinterpret_cast<const char*>(p + 1), n));
    const uint64_t word = load_u64(p) & (~uint64_t{0} >> (56 - 8 * n));  // length and text
    const size_t i = (word * 0x9e3779b97f4a7c15ull) >> 59;
    if (recent.code_plus_one[i] != 0 && recent.word[i] == word) return recent.code_plus_one[i] - 1;
    const uint32_t code =
        dictionary.code_of(std::string_view(reinterpret_cast<const char*>(p + 1), n));
    recent.word[i] = word;
    recent.code_plus_one[i] = code + 1;
    return code;
  }

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
  SplitBound end{0, true};            // where this part's records end (the first part's promise)
  bool placed = false;                // the second part: counted the first part's rows
  std::vector<uint64_t> rows_before;  // per table: the rows of the parts before this one
  uint64_t promise_step = kFirstStep;
  uint64_t consumed_at_promise = 0;
  // Clock values the first part's promise and the second part's count advance by, scaled to
  // cover about kPromiseBytes and kCountBytes of records.
  static constexpr uint64_t kFirstStep = uint64_t{1} << 16, kMaxStep = uint64_t{1} << 44;
  static constexpr uint64_t kPromiseBytes = 16u << 20, kCountBytes = 4u << 20;
};

ColumnReader::ColumnReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ColumnReader::~ColumnReader() = default;

Status ColumnReader::check_events(const Trace& trace, const ColumnOptions& options) {
  for (const std::string& f : options.events) {
    bool known = false;
    for (const EventInfo& e : trace.events()) {
      known = known || (!e.is_guard && (f == e.group || f == e.full_name()));
    }
    if (!known) return Status::NotFound(fmt::format("no event or group '{}' in this trace", f));
  }
  return Status::Ok();
}

Result<std::unique_ptr<ColumnReader>> ColumnReader::open(Trace& trace,
                                                         const ColumnOptions& options) {
  if (Status st = check_events(trace, options); !st.ok()) return st;
  auto impl = std::make_unique<Impl>(trace, options);
  impl->make_tables();
  impl->start();
  return std::unique_ptr<ColumnReader>(new ColumnReader(std::move(impl)));
}

Result<std::vector<std::unique_ptr<ColumnReader>>> ColumnReader::open_split(
    Trace& trace, const ColumnOptions& options, std::shared_ptr<reader::SplitBoundary> split) {
  if (Status st = check_events(trace, options); !st.ok()) return st;
  std::vector<std::unique_ptr<ColumnReader>> out;
  for (int part : {Impl::kFirstPart, Impl::kSecondPart}) {
    auto impl = std::make_unique<Impl>(trace, options);
    impl->make_tables();
    impl->start();
    impl->part = part;
    impl->split = split;
    if (part == Impl::kFirstPart) impl->end = SplitBound{0, false};  // nothing promised yet
    out.push_back(std::unique_ptr<ColumnReader>(new ColumnReader(std::move(impl))));
  }
  return out;
}

bool ColumnReader::next(ColumnSet* batch, size_t max_rows) {
  impl_->reset(batch);
  impl_->read(batch, max_rows == 0 ? 1 : max_rows);
  return batch->rows > 0;
}

const std::vector<uint64_t>& ColumnReader::rows_before() const {
  if (impl_->rows_before.empty()) impl_->rows_before.assign(impl_->tables.size(), 0);
  return impl_->rows_before;
}

bool ColumnReader::row_order() const { return impl_->options.row_order; }

uint64_t ColumnReader::max_rows() const { return reader::stream_bytes(impl_->trace) / 8 + 1; }

void ColumnReader::take_strings_of(const ColumnReader& later, const std::vector<uint64_t>& upto,
                                   ColumnSet* out) {
  impl_->take_strings_of(*later.impl_, later.rows_before(), upto, out);
}

void ColumnReader::layout(ColumnSet* set) {
  impl_->reset(set);
  impl_->report_threads(set);
}

FieldValue FieldColumn::value_at(size_t row) const {
  FieldValue v;
  v.type = info.type;
  if (is_string()) {
    v.text = string_at(row);
    v.bits = v.text.size();
  } else {
    v.bits = bits[row];
  }
  return v;
}

const EventTable* ColumnSet::find(std::string_view name) const {
  for (const EventTable& t : tables) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace nanotrace
