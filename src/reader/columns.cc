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
//
// The reader's state is ColumnReader::Impl (column_reader_impl.hpp); the tables it fills, and
// how each record layout decodes into them, are made in column_tables.cc.
#include "nanotrace/columns.hpp"

#include <algorithm>
#include <memory>

#include "reader/column_cursor.hpp"
#include "reader/column_reader_impl.hpp"
#include "reader/column_split.hpp"
#include "reader/record_walk.hpp"

namespace nanotrace {
namespace {

using reader::checked_size;
using reader::load_u64;
using reader::SplitBound;

}  // namespace

inline void ColumnReader::Impl::start() {
  std::vector<std::unique_ptr<SpanSource>> sources = trace.read_spans();
  cursors.resize(sources.size());
  for (uint32_t i = 0; i < sources.size(); ++i) {
    cursors[i].set(std::move(sources[i]), sizer);
    if (cursors[i].load()) live.push_back(i);
  }
}

// Points t's sink at its columns, with room for at least `rows` rows.
inline void ColumnReader::Impl::aim(size_t k, EventTable& t, size_t rows) {
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
inline void ColumnReader::Impl::finish_columns(ColumnSet* out) {
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

inline void ColumnReader::Impl::read(ColumnSet* out, size_t max_rows) {
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
inline void ColumnReader::Impl::report_threads(ColumnSet* out) {
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

// A step of clock values that covered `bytes` of records, scaled towards `target` bytes.
inline uint64_t ColumnReader::Impl::adapt_step(uint64_t step, uint64_t bytes, uint64_t target) {
  if (bytes < target / 2) return std::min(step * 4, kMaxStep);
  if (bytes > target * 2) return std::max(step / 2, kFirstStep);
  return step;
}

// The first part of a split read, whose streams all stand at or past its bound (best_ticks
// is the earliest): extends the promise by about kPromiseBytes of records. False at the cut.
inline bool ColumnReader::Impl::extend_first_part(uint64_t best_ticks) {
  promise_step = adapt_step(promise_step, consumed - consumed_at_promise, kPromiseBytes);
  consumed_at_promise = consumed;
  end = split->extend(SplitBound{best_ticks + promise_step, best_ticks > ~promise_step});
  return end.before(best_ticks);
}

// The second part of a split read: walks the streams to the cut, counting the first part's
// rows of each table, in steps of about kCountBytes; chooses the cut (SplitBoundary::choose)
// where the first part has as much left to read as this one.
inline void ColumnReader::Impl::place_second_part() {
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
inline void ColumnReader::Impl::take_strings_of(const Impl& other,
                                                const std::vector<uint64_t>& from,
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

// Takes thread's records for as long as they come before (bound_ticks, bound) and the
// batch has room; false once the thread has none left. The cursor's state is kept in
// locals meanwhile: the values stored into columns could otherwise alias it.
inline bool ColumnReader::Impl::run(reader::ColumnCursor& c, uint32_t thread, uint64_t bound_ticks,
                                    uint32_t bound, uint64_t max_rows, uint64_t* rows_io,
                                    ColumnSet* out) {
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
inline void ColumnReader::Impl::take(size_t k, const uint8_t* rec, uint16_t id, uint64_t ticks,
                                     uint64_t seq, uint32_t thread, uint64_t pos, ColumnSet* out) {
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
[[gnu::noinline]] void ColumnReader::Impl::take_strings(const Sink& s, const Table& layout,
                                                        const uint8_t* rec, size_t r) {
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
inline uint32_t ColumnReader::Impl::code_of(StringDictionary& dictionary, RecentCodes& recent,
                                            const uint8_t* p, uint32_t n) {
  if (n >= 8) return dictionary.code_of(std::string_view(reinterpret_cast<const char*>(p + 1), n));
  const uint64_t word = load_u64(p) & (~uint64_t{0} >> (56 - 8 * n));  // length and text
  const size_t i = (word * 0x9e3779b97f4a7c15ull) >> 59;
  if (recent.code_plus_one[i] != 0 && recent.word[i] == word) return recent.code_plus_one[i] - 1;
  const uint32_t code =
      dictionary.code_of(std::string_view(reinterpret_cast<const char*>(p + 1), n));
  recent.word[i] = word;
  recent.code_plus_one[i] = code + 1;
  return code;
}

ColumnReader::ColumnReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ColumnReader::~ColumnReader() = default;

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
