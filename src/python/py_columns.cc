// Trace.events() in C++: the trace read as columns with the GIL released, a large file in two
// parts at once on two threads (ColumnReader::open_parts), each batch's values written where
// its rows belong in the final columns, in their final types, which numpy then adopts (no
// copy: a capsule owns each column's ColumnArray). Numbers keep their field's width; strings
// are codes into the field's distinct strings (categories: one str each, made once per trace
// and shared by every table with that field); enums with value names are codes into their
// distinct values. No table holds a Python object per row.
//
// On a VM, fresh memory is most of what a load costs (the kernel zeroes each new page, and
// the hypervisor backs it): only the final columns take new memory (a part's batch columns
// are reused while in cache), and with two parts both CPUs fault it in. Each part codes
// strings with dictionaries of its own, so the codes are kept per part as they are read and
// translated into the categories' codes at the end, with the GIL back (a byte or two a row).
#include "python/py_columns.hpp"

#include <pybind11/numpy.h>

#include <bit>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "nanotrace/columns.hpp"
#include "python/py_categories.hpp"
#include "python/py_common.hpp"

namespace nanotrace::python {
namespace {

// Calls f(T{}) with T the element type of a number field's column: the field's own width (a
// u32 field is uint32, an f32 field float32, a bool bool; u64 and pointers uint64).
template <class F>
decltype(auto) with_number_type(abi::FieldType type, F&& f) {
  using abi::FieldType;
  switch (type) {
    case FieldType::kI8:
      return f(int8_t{});
    case FieldType::kI16:
      return f(int16_t{});
    case FieldType::kI32:
      return f(int32_t{});
    case FieldType::kI64:
      return f(int64_t{});
    case FieldType::kU8:
      return f(uint8_t{});
    case FieldType::kU16:
      return f(uint16_t{});
    case FieldType::kU32:
      return f(uint32_t{});
    case FieldType::kF32:
      return f(float{});
    case FieldType::kF64:
      return f(double{});
    case FieldType::kBool:
      return f(bool{});
    default:
      return f(uint64_t{});
  }
}

// Where rows [row, row + n) of a column of Ts go. The parts of a split read write a column at
// once, each its own rows, in memory reserved ahead (no reserve() then); a read in one part
// grows it here.
template <class T>
T* rows_at(ColumnArray<char>& column, uint64_t row, size_t n) {
  const size_t need = (row + n) * sizeof(T);
  if (need > column.capacity()) column.reserve(need);
  return reinterpret_cast<T*>(column.data()) + row;
}

// A number column's rows from FieldValue::bits: signed integers arrive sign-extended, floats
// as IEEE double bits, bools as 0 or 1.
template <class T>
void put_numbers(const uint64_t* bits, size_t rows, T* out) {
  for (size_t i = 0; i < rows; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      out[i] = static_cast<T>(std::bit_cast<double>(bits[i]));
    } else {
      out[i] = static_cast<T>(bits[i]);
    }
  }
}

// One part's codes of a string or enum column, its own: entries of the part's dictionary, or
// the enum values in the order the part met them. Translated when the categories are made.
class PartCodes {
 public:
  void add_strings(const uint32_t* codes, size_t rows, size_t entries) {
    codes_.append(rows, entries, [&](size_t i) { return codes[i]; });
  }
  void add_enums(const uint64_t* bits, size_t rows) {
    batch_.resize(rows);
    for (size_t i = 0; i < rows; ++i) batch_[i] = code(bits[i]);
    codes_.append(rows, values_.size(), [&](size_t i) { return batch_[i]; });
  }
  CodeColumn& codes() { return codes_; }
  const std::vector<uint64_t>& values() const { return values_; }

 private:
  int32_t code(uint64_t bits) {
    if (bits == last_bits_ && last_code_ >= 0) return last_code_;
    auto [it, added] = of_value_.try_emplace(bits, static_cast<int32_t>(values_.size()));
    if (added) values_.push_back(bits);
    last_bits_ = bits;
    return last_code_ = it->second;
  }
  CodeColumn codes_;
  std::unordered_map<uint64_t, int32_t> of_value_;
  std::vector<uint64_t> values_;  // by code
  std::vector<int32_t> batch_;
  uint64_t last_bits_ = 0;
  int32_t last_code_ = -1;
};

// The codes of every part of a column, translated (to[p]: part p's code -> category code),
// as one column of codes into `categories` categories.
py::array joined_codes(std::vector<PartCodes>& parts, const std::vector<std::vector<int32_t>>& to,
                       size_t categories) {
  CodeColumn out;
  size_t p = 0;
  // The first part's codes as they are, when they are the categories' codes already.
  bool same = true;
  for (size_t c = 0; c < to[0].size() && same; ++c) same = to[0][c] == static_cast<int32_t>(c);
  if (same) out = std::move(parts[p++].codes());
  for (; p < parts.size(); ++p) {
    const int32_t* map = to[p].data();
    parts[p].codes().visit([&](const auto* codes, size_t rows) {
      out.append(rows, categories, [&](size_t i) { return map[codes[i]]; });
    });
  }
  return std::move(out).finish(categories);
}

// An enum's categories: the name where a value has one, the number otherwise (as dump
// --json); values of one name share a category. to[p]: part p's code -> category code.
py::tuple enum_column(const FieldInfo& info, std::vector<PartCodes>& parts) {
  CategoryList list;
  std::vector<std::vector<int32_t>> to(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    for (uint64_t bits : parts[p].values()) {
      const std::string* name = info.name_of(bits);
      std::string key(1, name != nullptr ? 'n' : 'v');
      key += name != nullptr ? *name : std::to_string(bits);
      const FieldValue value{info.type, bits, {}};
      to[p].push_back(list.code(key, [&] { return value_object(info, value); }));
    }
  }
  return categorical(joined_codes(parts, to, list.size()), list.array());
}

// The categories of the string columns of each field name: every part's dictionary of that
// name feeds one list.
using StringCategoryMap = std::unordered_map<std::string, StringCategories>;

py::tuple string_column(StringCategories& categories,
                        const std::vector<const StringDictionary*>& dictionaries,
                        std::vector<PartCodes>& parts) {
  std::vector<std::vector<int32_t>> to;
  for (const StringDictionary* d : dictionaries) to.push_back(categories.update(*d));
  return categorical(joined_codes(parts, to, categories.size()), categories.array());
}

// Sequence numbers as uint32 while they fit (a thread's first 4 Gi records: 4 bytes a row
// less). A part that meets a larger one keeps its rows from there on as uint64 too; the
// column is then widened once, at the end.
struct PartSeq {
  uint64_t wide_from = ~uint64_t{0};  // row of the table
  ColumnArray<uint64_t> wide;         // rows from wide_from on
};

// A read-only column of `rows` times the same value: one element, stride 0 (no memory per
// row; pandas copies it when it builds a frame).
template <class T>
py::array constant_column(T value, size_t rows) {
  ColumnArray<T> one;
  one.push_back(value);
  py::array single = adopt<T>(std::move(one));
  py::array out(single.dtype(), {static_cast<py::ssize_t>(rows)}, {py::ssize_t{0}}, single.data(),
                single);
  out.attr("setflags")(py::arg("write") = false);
  return out;
}

const char* const kFixedColumns[] = {"time_ns", "pid", "tid", "seq"};

// A field whose name is a fixed column's, or "event", keeps its name under "fields." (as in
// dump's JSON): a table of several events has an event column.
std::string column_name(const std::string& field) {
  for (const char* fixed : kFixedColumns) {
    if (field == fixed) return "fields." + field;
  }
  if (field == "event") return "fields.event";
  return field;
}

// How the rows of a batch map to the final columns: per thread index, its tid and pid.
struct Threads {
  std::vector<uint32_t> tids, pids;
  std::optional<uint32_t> one_pid;  // every thread's, when they are of one process
};

// One table's final columns, which the parts fill at once (each its own rows), and each
// part's own codes and wide sequence numbers.
class TableColumns {
 public:
  // max_rows: the most rows the table can have (its columns are reserved for them: the
  // parts write at once), or 0 (one part: they grow).
  TableColumns(const EventTable& shape, size_t parts, uint64_t max_rows, const Threads& threads,
               bool row_order)
      : fields_(shape.fields.size()), codes_(shape.fields.size()), seq_(parts) {
    for (std::vector<PartCodes>& c : codes_) c.resize(parts);
    if (max_rows == 0) return;
    time_ns_.reserve_lazily(max_rows * 8);
    if (row_order) order_.reserve_lazily(max_rows * 8);
    tid_.reserve_lazily(max_rows * 4);
    if (!threads.one_pid) pid_.reserve_lazily(max_rows * 4);
    seq_column_.reserve_lazily(max_rows * 4);
    for (size_t j = 0; j < fields_.size(); ++j) {
      const FieldInfo& f = shape.fields[j].info;
      if (f.type == abi::FieldType::kString || !f.value_names.empty()) continue;
      with_number_type(f.type, [&](auto t) { fields_[j].reserve_lazily(max_rows * sizeof(t)); });
    }
  }

  // Writes part p's rows of batch table t from `row` on.
  void put(size_t p, const EventTable& t, uint64_t row, const Threads& threads, bool row_order) {
    const size_t rows = t.rows();
    if (rows == 0) return;
    std::memcpy(rows_at<uint64_t>(time_ns_, row, rows), t.time_ns.data(), rows * 8);
    if (row_order) std::memcpy(rows_at<uint64_t>(order_, row, rows), t.order.data(), rows * 8);
    const uint32_t* thread = t.thread.data();
    uint32_t* tid = rows_at<uint32_t>(tid_, row, rows);
    for (size_t i = 0; i < rows; ++i) tid[i] = threads.tids[thread[i]];
    if (!threads.one_pid) {
      uint32_t* pid = rows_at<uint32_t>(pid_, row, rows);
      for (size_t i = 0; i < rows; ++i) pid[i] = threads.pids[thread[i]];
    }
    put_seq(p, t.seq.data(), row, rows);
    for (size_t j = 0; j < t.fields.size(); ++j) {
      const FieldColumn& c = t.fields[j];
      if (c.is_string()) {
        codes_[j][p].add_strings(c.codes.data(), rows, c.dictionary->size());
      } else if (!c.info.value_names.empty()) {
        codes_[j][p].add_enums(c.bits.data(), rows);
      } else {
        with_number_type(c.info.type, [&](auto type) {
          put_numbers(c.bits.data(), rows, rows_at<decltype(type)>(fields_[j], row, rows));
        });
      }
    }
  }

  // The columns of `rows` rows, named: time_ns, pid, tid, seq, then one per field.
  // dictionaries[p][j]: part p's dictionary of string field j.
  py::dict finish(const EventTable& t, size_t rows, const Threads& threads,
                  const std::vector<std::vector<const StringDictionary*>>& dictionaries,
                  StringCategoryMap& strings) && {
    py::dict columns;
    time_ns_.resize(rows * 8);
    columns["time_ns"] = adopt<uint64_t>(std::move(time_ns_));
    if (threads.one_pid) {
      columns["pid"] = constant_column<uint32_t>(*threads.one_pid, rows);
    } else {
      pid_.resize(rows * 4);
      columns["pid"] = adopt<uint32_t>(std::move(pid_));
    }
    tid_.resize(rows * 4);
    columns["tid"] = adopt<uint32_t>(std::move(tid_));
    columns["seq"] = std::move(*this).seq(rows);
    for (size_t j = 0; j < t.fields.size(); ++j) {
      const FieldColumn& c = t.fields[j];
      py::object column;
      if (c.is_string()) {
        std::vector<const StringDictionary*> of_parts;
        for (const auto& d : dictionaries) of_parts.push_back(d[j]);
        column = string_column(strings[c.info.name], of_parts, codes_[j]);
      } else if (!c.info.value_names.empty()) {
        column = enum_column(c.info, codes_[j]);
      } else {
        fields_[j].resize(rows * with_number_type(c.info.type, [](auto v) { return sizeof(v); }));
        column = with_number_type(c.info.type, [&](auto v) -> py::object {
          return adopt<decltype(v)>(std::move(fields_[j]));
        });
      }
      columns[py::str(text(column_name(c.info.name)))] = column;
    }
    return columns;
  }

  py::array order(size_t rows) && {
    order_.resize(rows * 8);
    return adopt<uint64_t>(std::move(order_));
  }

 private:
  void put_seq(size_t p, const uint64_t* seq, uint64_t row, size_t rows) {
    uint32_t* out = rows_at<uint32_t>(seq_column_, row, rows);
    uint64_t high = 0;
    for (size_t i = 0; i < rows; ++i) {
      out[i] = static_cast<uint32_t>(seq[i]);
      high |= seq[i] >> 32;
    }
    PartSeq& s = seq_[p];
    if (high != 0 && s.wide_from == ~uint64_t{0}) s.wide_from = row;
    if (s.wide_from != ~uint64_t{0}) s.wide.append(seq, rows);
  }

  // uint32 unless a part met a larger one: then uint64, from the parts' wide rows where they
  // have them.
  py::array seq(size_t rows) && {
    bool wide = false;
    for (const PartSeq& s : seq_) wide = wide || s.wide_from != ~uint64_t{0};
    if (!wide) {
      seq_column_.resize(rows * 4);
      return adopt<uint32_t>(std::move(seq_column_));
    }
    ColumnArray<uint64_t> out;
    out.resize(rows);
    const auto* narrow = reinterpret_cast<const uint32_t*>(seq_column_.data());
    for (size_t i = 0; i < rows; ++i) out[i] = narrow[i];
    for (const PartSeq& s : seq_) {
      for (size_t i = 0; i < s.wide.size(); ++i) out[s.wide_from + i] = s.wide[i];
    }
    return adopt<uint64_t>(std::move(out));
  }

  ColumnArray<char> time_ns_, order_, tid_, pid_, seq_column_;
  std::vector<ColumnArray<char>> fields_;      // numbers, by field (in their width)
  std::vector<std::vector<PartCodes>> codes_;  // strings and enums: by field, by part
  std::vector<PartSeq> seq_;                   // by part
};

// Rows per batch: the batch's columns stay in cache while their values are moved on.
constexpr size_t kBatchRows = 16 << 10;

// The threads of the read (from any reader's layout: they are all known when it opens).
Threads threads_of(const ColumnSet& shape) {
  Threads out;
  for (const ThreadStats& t : shape.threads) out.tids.push_back(t.info.tid);
  out.pids = shape.thread_pid;
  bool one_process = true;
  for (uint32_t pid : out.pids) one_process = one_process && pid == out.pids[0];
  if (one_process) out.one_pid = out.pids.empty() ? 0 : out.pids[0];
  return out;
}

}  // namespace

py::object column_object(const FieldColumn& column, size_t rows) {
  std::vector<PartCodes> one(1);
  if (column.is_string()) {
    StringCategories categories;
    one[0].add_strings(column.codes.data(), rows, column.dictionary->size());
    return string_column(categories, {column.dictionary.get()}, one);
  }
  if (!column.info.value_names.empty()) {
    one[0].add_enums(column.bits.data(), rows);
    return enum_column(column.info, one);
  }
  return with_number_type(column.info.type, [&](auto v) -> py::object {
    using T = decltype(v);
    ColumnArray<char> bytes;
    put_numbers(column.bits.data(), rows, rows_at<T>(bytes, 0, rows));
    bytes.resize(rows * sizeof(T));
    return adopt<T>(std::move(bytes));
  });
}

py::tuple read_tables(Trace& trace, const std::vector<std::string>& events, bool row_order) {
  ColumnOptions options;
  options.events = events;
  options.row_order = row_order;
  options.max_dictionary_entries = 0;  // one dictionary per field (and part) for the whole read
  std::vector<std::unique_ptr<ColumnReader>> parts = take(ColumnReader::open_parts(trace, options));
  ColumnSet shape;
  parts[0]->layout(&shape);
  const Threads threads = threads_of(shape);
  const uint64_t max_rows = parts.size() > 1 ? parts[0]->max_rows() : 0;
  std::vector<TableColumns> out;
  for (const EventTable& t : shape.tables) {
    out.emplace_back(t, parts.size(), max_rows, threads, row_order);
  }
  // Per part: its rows of each table so far, and its dictionaries of each table's fields.
  std::vector<std::vector<uint64_t>> at(parts.size());
  std::vector<std::vector<std::vector<const StringDictionary*>>> dictionaries(
      shape.tables.size(), std::vector<std::vector<const StringDictionary*>>(parts.size()));
  ColumnSet last;
  {
    py::gil_scoped_release unlocked;
    last = read_parts(parts, kBatchRows, [&](size_t p, const ColumnSet& batch) {
      if (at[p].empty()) {
        at[p] = parts[p]->rows_before();
        for (size_t k = 0; k < batch.tables.size(); ++k) {
          for (const FieldColumn& f : batch.tables[k].fields) {
            dictionaries[k][p].push_back(f.is_string() ? f.dictionary.get() : nullptr);
          }
        }
      }
      for (size_t k = 0; k < batch.tables.size(); ++k) {
        out[k].put(p, batch.tables[k], at[p][k], threads, row_order);
        at[p][k] += batch.tables[k].rows();
      }
    });
  }
  StringCategories names;
  names.update(*last.event_names);
  StringCategoryMap strings;
  py::dict tables, orders, event_codes;
  for (size_t k = 0; k < shape.tables.size(); ++k) {
    const EventTable& t = shape.tables[k];
    const size_t rows = at.back()[k];
    // Call sites of one name with different fields: "name", "name#2", ...
    std::string key = t.name;
    for (int n = 2; tables.contains(py::str(text(key))); ++n) {
      key = t.name + "#" + std::to_string(n);
    }
    py::str name = text(key);
    if (row_order) orders[name] = std::move(out[k]).order(rows);
    tables[name] = std::move(out[k]).finish(t, rows, threads, dictionaries[k], strings);
    event_codes[name] = names.codes()[t.name_code];
  }
  return py::make_tuple(tables, orders, event_codes, names.array());
}

}  // namespace nanotrace::python
