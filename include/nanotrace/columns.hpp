// Reading records as columns: the records of a trace decoded straight into one table per
// event layout, a column per value (time, thread, sequence number, each field), without a
// Record per record. For bindings (the Python module hands these arrays to numpy without a
// copy) and for analyses that want whole columns.
//
// The rows of all tables together are exactly the records Trace::read_all() returns, in the
// same order (merged by time, ties by thread), with the same loss accounting; `order` can
// give each row's position in that stream, to interleave tables again.
//
// Strings are dictionary-encoded: a string column holds a code per row into a
// StringDictionary of the distinct strings, shared by the string columns of one field name
// in every table of a read, and kept from batch to batch (as Arrow's dictionary arrays,
// pandas' Categorical and ClickHouse's LowCardinality). Event names have one too
// (ColumnSet::event_names). So a consumer decodes, converts or ships each distinct string
// once, not once per row.
//
// Memory: everything selected is held at once (about 8 bytes per value, 4 per string plus
// its distinct strings once). Select events to read less. Each column lives in a mapping
// of its own that does not move as it grows (address space is reserved, memory is used as
// written), on huge pages where the kernel has them: on a VM a fresh 4 KiB page can cost more
// to fault in than the values written to it.
//
// Threads: a trace file's records can be read in two parts at once, cut in time
// (ColumnReader::open_parts; read_columns() does so where the process may use two CPUs): on a
// VM, faulting fresh memory in costs as much as decoding, and both then run on both CPUs.
//
// Thread safety: read_columns() uses the Trace, which belongs to one thread at a time; a
// ColumnSet is a plain value (its dictionaries are shared with the reader that made it:
// read them on the reader's thread while it reads on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

namespace reader {
class SplitBoundary;
}  // namespace reader

namespace detail {
// Bytes in an anonymous mapping of their own (see ColumnArray).
class ColumnStorage {
 public:
  ColumnStorage() = default;
  ~ColumnStorage();
  ColumnStorage(ColumnStorage&& other) noexcept;
  ColumnStorage& operator=(ColumnStorage&& other) noexcept;
  ColumnStorage(const ColumnStorage&) = delete;
  ColumnStorage& operator=(const ColumnStorage&) = delete;
  void* data() const { return data_; }
  // Bytes that may be written without calling reserve() again.
  size_t capacity() const { return ready_; }
  // Makes room for at least `bytes` (contents kept). Throws std::bad_alloc as a vector would.
  // fill_ahead: fault the next small pages in at once (the small part at the start).
  void reserve(size_t bytes, bool fill_ahead = true);

 private:
  void* data_ = nullptr;
  void* base_ = nullptr;  // of the mapping (data_ lies inside it)
  size_t mapped_ = 0;     // bytes of address space mapped from base_
  size_t ready_ = 0;      // bytes from data_ usable now
};
}  // namespace detail

// A growable array of trivially copyable values, like a vector of them, but in its own
// mapping: growing does not copy, and memory is taken as it is written.
template <class T>
class ColumnArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return static_cast<T*>(storage_.data()); }
  const T* data() const { return static_cast<const T*>(storage_.data()); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  void push_back(T value) {
    if (size_ == capacity_) grow(size_ + 1);
    data()[size_++] = value;
  }
  void append(const T* values, size_t n) {
    if (n == 0) return;  // data() may be null yet
    if (size_ + n > capacity_) grow(size_ + n);
    __builtin_memcpy(data() + size_, values, n * sizeof(T));
    size_ += n;
  }
  // Empties the array, keeping its memory.
  void clear() { size_ = 0; }
  // Sets the size; new elements are zero (fresh pages) or left as they were.
  void resize(size_t n) {
    if (n > capacity_) grow(n);
    size_ = n;
  }
  // Makes room for n elements without changing the size: data()[size(), n) may then be
  // written, and kept with resize().
  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }
  // As reserve(), but no memory is taken before it is written: for a column that threads fill
  // at once (each its own rows, through data(), with no reserve() meanwhile) and whose size
  // is known only once they are done.
  void reserve_lazily(size_t n) {
    if (n > capacity_) grow(n, false);
  }
  size_t capacity() const { return capacity_; }

 private:
  void grow(size_t n, bool fill_ahead = true) {
    storage_.reserve(n * sizeof(T), fill_ahead);
    capacity_ = storage_.capacity() / sizeof(T);
  }
  detail::ColumnStorage storage_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The distinct strings of string columns, each with a code: its index, in the order the
// strings first appeared. Entries are only ever added, so a code keeps its string for the
// dictionary's life: the batches of a ColumnReader index the same dictionaries (until one
// outgrows ColumnOptions::max_dictionary_entries), and a consumer that ships or converts
// them handles only the entries [the size it saw last, size()) with each batch. Strings are
// the bytes as recorded (not necessarily valid UTF-8); equal bytes are one entry.
class StringDictionary {
 public:
  StringDictionary();
  size_t size() const { return offsets_.size() - 1; }
  std::string_view operator[](uint32_t code) const {
    return std::string_view(text_.data() + offsets_[code], offsets_[code + 1] - offsets_[code]);
  }
  // The code of text: its entry's, or a new entry's.
  uint32_t code_of(std::string_view text);
  // Entry i is text()[offsets()[i], offsets()[i + 1]) (size() + 1 offsets).
  const ColumnArray<uint64_t>& offsets() const { return offsets_; }
  const ColumnArray<char>& text() const { return text_; }

 private:
  // An entry of the index. key: a text of up to 8 bytes itself (all of its bytes in one
  // word: with its size, equal keys are equal texts), a longer one's hash.
  struct Slot {
    uint64_t key = 0;
    uint32_t size = 0;
    uint32_t code_plus_one = 0;  // 0: empty
  };
  uint64_t hash(std::string_view text) const;
  [[gnu::noinline]] uint32_t code_of_long(std::string_view text);
  uint32_t add(std::string_view text, uint64_t key, size_t slot);
  void grow_index();

  ColumnArray<uint64_t> offsets_;
  ColumnArray<char> text_;
  std::vector<Slot> index_;  // open addressing, linear probing; at most half full
  uint64_t seed_;
};

// One field of an EventTable.
struct FieldColumn {
  FieldInfo info;  // name, type, enum value names
  // Every type but kString: one word per row, as FieldValue::bits (signed integers
  // sign-extended, floats as IEEE double bits, bools 0 or 1).
  ColumnArray<uint64_t> bits;
  // kString: row i is (*dictionary)[codes[i]]. The dictionary is shared by the columns of
  // this field name in every table of the read.
  ColumnArray<uint32_t> codes;
  std::shared_ptr<const StringDictionary> dictionary;

  bool is_string() const { return info.type == abi::FieldType::kString; }
  std::string_view string_at(size_t row) const { return (*dictionary)[codes[row]]; }
  // Row i as a FieldValue (its text, for a string, points into the dictionary).
  FieldValue value_at(size_t row) const;
};

// The records of one event layout: the call sites of one full name that share field names
// and types (a name whose call sites differ gets one table per layout).
struct EventTable {
  std::string name;           // "group:event"
  uint32_t name_code = 0;     // its code in ColumnSet::event_names
  std::vector<uint16_t> ids;  // the event ids (call sites) it holds
  ColumnArray<uint64_t> time_ns;
  ColumnArray<uint64_t> seq;     // per-thread record number
  ColumnArray<uint32_t> thread;  // index into ColumnSet::threads
  // Event id of each row: only when the table holds several ids (empty: ids[0]).
  ColumnArray<uint16_t> event;
  // With ColumnOptions::row_order: each row's position among all rows of the ColumnSet.
  ColumnArray<uint64_t> order;
  std::vector<FieldColumn> fields;
  size_t rows() const { return time_ns.size(); }
};

// Records missing from one thread's sequence numbers (Record::seq jumps, or the thread's first
// record is not number 0), placed where the stream shows it, as IntervalMatcher::add()
// notices it record by record; records of events not selected count too.
struct SequenceGap {
  // Position (as EventTable::order) of the first row read after the gap; the gaps of a batch
  // all come before the next batch's rows.
  uint64_t row = 0;
  uint32_t thread = 0;   // index into ColumnSet::threads
  uint64_t records = 0;  // missing
};

struct ColumnSet {
  std::vector<EventTable> tables;
  // The tables' distinct names (EventTable::name_code), in table order.
  std::shared_ptr<const StringDictionary> event_names;
  // This batch's gaps, in stream order (ColumnReader: the last, empty batch may hold some).
  std::vector<SequenceGap> gaps;
  std::vector<ThreadStats> threads;  // per thread stream, as RecordSource::threads(), so far
  std::vector<uint32_t> thread_pid;  // per thread stream: the process it belongs to
  uint64_t rows = 0;                 // all tables
  // Records lost, all causes (as TraceStats::lost): every thread's plus the process's.
  uint64_t lost = 0;
  uint64_t corrupt_blocks = 0;
  // The table named `name` ("group:event"), or null. With several layouts: the first.
  const EventTable* find(std::string_view name) const;
};

struct ColumnOptions {
  // Events to read: "group:event" or "group"; empty: every event.
  std::vector<std::string> events;
  // Fill EventTable::order (to interleave the tables again).
  bool row_order = false;
  // Fields to read, by name: a table has columns only for its fields named here (in their
  // order in the event); empty: every field.
  std::vector<std::string> fields;
  // ColumnReader: a string dictionary holding more entries than this when a batch starts is
  // replaced by a new, empty one (FieldColumn::dictionary then changes), so that a column of
  // ever new strings does not grow without bound; 0: never (every batch shares them).
  size_t max_dictionary_entries = size_t{1} << 20;
  // How many parts of a trace file read_columns() (and the Python module) reads at once, each
  // on a thread (ColumnReader::open_parts): 0 chooses, 1 reads on the calling thread alone.
  unsigned parts = 0;
};

// Reads a trace's records as columns a batch at a time, in bounded memory: each batch is a
// ColumnSet whose tables hold the next rows (the tables are the same from batch to batch;
// their memory is reused).
class ColumnReader {
 public:
  // open - starts reading trace (a live segment: the records written so far, not consumed).
  // REQUIRES: trace outlives the reader, and is not refreshed while it reads.
  // Errors: kNotFound if an entry of options.events names no event or group of the trace.
  static Result<std::unique_ptr<ColumnReader>> open(Trace& trace, const ColumnOptions& options);
  // open_parts - a read of trace cut in time into parts that threads read at once, each
  // reader on a thread of its own. Part p's rows follow those of the parts before it in every
  // table: the parts' rows in order are the rows open()'s reader gives. The cut is chosen
  // while they read, so that the parts end together (a part given less CPU reads less).
  // parts: at most 2; 0: 2 where the process may run on two CPUs. One part (open()'s reader)
  // for a live segment (its rings move between two reads of them) or a file under 8 MiB.
  // Each part has string dictionaries of its own (codes its own); EventTable::order and
  // ColumnSet::gaps count rows of the whole read; the last part's statistics (threads, lost,
  // corrupt_blocks) are the whole read's. Set max_dictionary_entries to 0.
  // Errors: as open().
  static Result<std::vector<std::unique_ptr<ColumnReader>>> open_parts(Trace& trace,
                                                                       const ColumnOptions& options,
                                                                       unsigned parts = 0);
  ~ColumnReader();
  ColumnReader(const ColumnReader&) = delete;
  ColumnReader& operator=(const ColumnReader&) = delete;
  // Empties batch and fills it with up to max_rows more rows (all tables together); its
  // thread statistics and losses are those so far. False once no record is left (batch
  // empty; its statistics complete).
  bool next(ColumnSet* batch, size_t max_rows);
  // A part of open_parts(): the rows of each table (in ColumnSet::tables' order) that the
  // parts before it hold. Known once next() was called (the second part counts them first).
  const std::vector<uint64_t>& rows_before() const;
  // Lays set's tables out as next() fills them, empty, with the thread statistics so far.
  void layout(ColumnSet* set);
  // The most rows the whole read can give (a record of a file takes at least 8 bytes), for
  // columns that parts fill at once: reserved for that many rows, they never move.
  uint64_t max_rows() const;

 private:
  struct Impl;
  friend struct ColumnSplitTesting;  // tests: a split at a given clock value
  friend Result<ColumnSet> read_columns(Trace& trace, const ColumnOptions& options);
  explicit ColumnReader(std::unique_ptr<Impl> impl);
  static Status check_events(const Trace& trace, const ColumnOptions& options);
  static Result<std::vector<std::unique_ptr<ColumnReader>>> open_split(
      Trace& trace, const ColumnOptions& options, std::shared_ptr<reader::SplitBoundary> split);
  static Result<ColumnSet> read_split(std::vector<std::unique_ptr<ColumnReader>>& parts);
  bool row_order() const;
  // read_split(): a later part's strings into this part's dictionaries, and its codes in out
  // (its rows of each table, up to upto) translated.
  void take_strings_of(const ColumnReader& later, const std::vector<uint64_t>& upto,
                       ColumnSet* out);
  std::unique_ptr<Impl> impl_;
};

// read_parts - reads the parts of open_parts() at once, the first on the calling thread and
// each other on a thread of its own: take(p, batch) gets each batch of part p (up to max_rows
// rows) on p's thread, the last one empty (it may hold gaps). Returns the last part's last
// batch (the read's statistics).
// Rethrows what take() or a reader threw, once every part stopped.
ColumnSet read_parts(const std::vector<std::unique_ptr<ColumnReader>>& parts, size_t max_rows,
                     const std::function<void(size_t part, const ColumnSet& batch)>& take);

// read_columns - reads every record of trace selected by options (a live segment: the
// records written so far, without consuming them); a large file in two parts at once
// (ColumnOptions::parts).
// Returns: one table per event layout selected, in event id order (tables of events without
// records are present and empty).
// Errors: kNotFound if an entry of options.events names no event or group of the trace.
Result<ColumnSet> read_columns(Trace& trace, const ColumnOptions& options = {});

}  // namespace nanotrace
