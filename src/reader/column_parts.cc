// Reading a trace file's columns in parts at once (ColumnReader::open_parts, read_parts) and
// read_columns(), which does so where it pays: the cut and how the parts agree on it are in
// column_split.hpp. On a VM, faulting fresh memory in costs as much as decoding the records
// into it, and both run on both CPUs then.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>

#include "nanotrace/columns.hpp"
#include "reader/column_split.hpp"

namespace nanotrace {

namespace {

// Files smaller than this are read in one part: two threads would save less than they cost.
constexpr uint64_t kSplitMinBytes = 8u << 20;
// Nor larger than this: a column reserves 8 GiB of address space (column_storage.cc), and the
// parts' columns must not move while they are written (a row takes at most 8 bytes a column,
// a record at least 8).
constexpr uint64_t kSplitMaxBytes = uint64_t{4} << 30;

// The CPUs this process may run on.
unsigned usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return static_cast<unsigned>(CPU_COUNT(&set));
}

}  // namespace

Result<std::vector<std::unique_ptr<ColumnReader>>> ColumnReader::open_parts(
    Trace& trace, const ColumnOptions& options, unsigned parts) {
  if (parts == 0) parts = std::min(usable_cpus(), 2u);
  const uint64_t bytes = reader::stream_bytes(trace);
  std::vector<std::unique_ptr<ColumnReader>> out;
  if (parts < 2 || bytes < kSplitMinBytes || bytes > kSplitMaxBytes) {
    auto whole = open(trace, options);
    if (!whole.ok()) return whole.status();
    out.push_back(std::move(*whole));
    return out;
  }
  return open_split(trace, options, std::make_shared<reader::SplitBoundary>(bytes));
}

ColumnSet read_parts(const std::vector<std::unique_ptr<ColumnReader>>& parts, size_t max_rows,
                     const std::function<void(size_t part, const ColumnSet& batch)>& take) {
  std::vector<ColumnSet> last(parts.size());
  std::vector<std::exception_ptr> failed(parts.size());
  std::atomic<bool> stop{false};
  auto read = [&](size_t p) {
    try {
      bool more = true;
      while (more && !stop.load(std::memory_order_relaxed)) {
        more = parts[p]->next(&last[p], max_rows);
        take(p, last[p]);  // the last one, empty, may hold gaps
      }
    } catch (...) {
      failed[p] = std::current_exception();
      stop = true;
    }
  };
  std::vector<std::thread> threads;
  for (size_t p = 1; p < parts.size(); ++p) threads.emplace_back(read, p);
  read(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : failed) {
    if (e) std::rethrow_exception(e);
  }
  return std::move(last.back());
}

namespace {

// Rows of a batch in a split read_columns(): small enough to stay in cache until copied.
constexpr size_t kPartBatchRows = 16 << 10;

template <class T>
void copy_rows(ColumnArray<T>& to, const ColumnArray<T>& from, uint64_t at) {
  if (!from.empty()) std::memcpy(to.data() + at, from.data(), from.size() * sizeof(T));
}

// Every column of set, reserved (no memory taken) for `rows` rows.
void reserve_columns(ColumnSet* set, uint64_t rows, bool row_order) {
  for (EventTable& t : set->tables) {
    t.time_ns.reserve_lazily(rows);
    t.seq.reserve_lazily(rows);
    t.thread.reserve_lazily(rows);
    if (t.ids.size() > 1) t.event.reserve_lazily(rows);
    if (row_order) t.order.reserve_lazily(rows);
    for (FieldColumn& f : t.fields) {
      if (f.is_string()) {
        f.codes.reserve_lazily(rows);
      } else {
        f.bits.reserve_lazily(rows);
      }
    }
  }
}

// Copies a part's batch into the rows of out where they belong (at: per table, the part's
// rows so far, its rows_before() to begin with).
void place_batch(const ColumnSet& batch, bool row_order, std::vector<uint64_t>* at,
                 ColumnSet* out) {
  for (size_t k = 0; k < batch.tables.size(); ++k) {
    const EventTable& from = batch.tables[k];
    EventTable& to = out->tables[k];
    const uint64_t row = (*at)[k];
    copy_rows(to.time_ns, from.time_ns, row);
    copy_rows(to.seq, from.seq, row);
    copy_rows(to.thread, from.thread, row);
    if (to.ids.size() > 1) copy_rows(to.event, from.event, row);
    if (row_order) copy_rows(to.order, from.order, row);
    for (size_t j = 0; j < from.fields.size(); ++j) {
      if (from.fields[j].is_string()) {
        copy_rows(to.fields[j].codes, from.fields[j].codes, row);
      } else {
        copy_rows(to.fields[j].bits, from.fields[j].bits, row);
      }
    }
    (*at)[k] += from.rows();
  }
}

}  // namespace

// read_columns() of a file in parts: each part's batches are copied where their rows belong
// in the whole read's columns (reserved ahead, and written by both threads at once); then
// the first part's dictionaries take the second part's strings, and its codes are translated.
Result<ColumnSet> ColumnReader::read_split(std::vector<std::unique_ptr<ColumnReader>>& parts) {
  const bool row_order = parts[0]->row_order();
  ColumnSet out;
  parts[0]->layout(&out);
  reserve_columns(&out, parts[0]->max_rows(), row_order);
  std::vector<std::vector<uint64_t>> at(parts.size());
  std::vector<std::vector<SequenceGap>> gaps(parts.size());
  ColumnSet last = read_parts(parts, kPartBatchRows, [&](size_t p, const ColumnSet& batch) {
    if (at[p].empty()) at[p] = parts[p]->rows_before();
    place_batch(batch, row_order, &at[p], &out);
    gaps[p].insert(gaps[p].end(), batch.gaps.begin(), batch.gaps.end());
  });
  for (size_t p = 0; p < parts.size(); ++p) {
    if (at[p].empty()) at[p] = parts[p]->rows_before();  // a part without rows
    out.gaps.insert(out.gaps.end(), gaps[p].begin(), gaps[p].end());
  }
  for (size_t k = 0; k < out.tables.size(); ++k) {
    EventTable& t = out.tables[k];
    const uint64_t rows = at.back()[k];
    out.rows += rows;
    t.time_ns.resize(rows);
    t.seq.resize(rows);
    t.thread.resize(rows);
    if (t.ids.size() > 1) t.event.resize(rows);
    if (row_order) t.order.resize(rows);
    for (FieldColumn& f : t.fields) {
      if (f.is_string()) {
        f.codes.resize(rows);
      } else {
        f.bits.resize(rows);
      }
    }
  }
  for (size_t p = 1; p < parts.size(); ++p) {
    parts[0]->take_strings_of(*parts[p], at[p], &out);
  }
  out.threads = std::move(last.threads);
  out.thread_pid = std::move(last.thread_pid);
  out.lost = last.lost;
  out.corrupt_blocks = last.corrupt_blocks;
  return out;
}

Result<ColumnSet> read_columns(Trace& trace, const ColumnOptions& options) {
  ColumnOptions split = options;
  split.max_dictionary_entries = 0;  // one dictionary per field for the whole read
  auto parts = ColumnReader::open_parts(trace, split, options.parts);
  if (!parts.ok()) return parts.status();
  ColumnSet out;
  if (parts->size() == 1) {
    (*parts)[0]->next(&out, ~size_t{0});
    return out;
  }
  return ColumnReader::read_split(*parts);
}

}  // namespace nanotrace
