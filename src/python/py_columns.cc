// Trace.events() in C++: the trace read in batches of columns (ColumnReader, GIL released),
// each batch's values moved into the final columns, in their final types, which numpy then
// adopts (no copy: a capsule owns each column's ColumnArray). Numbers keep their field's
// width; strings are codes into the reader's dictionary of the field's distinct strings,
// whose categories (one str each) are made once per trace and shared by every table with
// that field; enums with value names are codes into their distinct values. No table holds a
// Python object per row.
//
// On a VM, fresh memory is most of what a load costs (the kernel zeroes each new page, and
// the hypervisor backs it): only the final columns take new memory; a batch's own columns
// are reused from batch to batch while in cache.
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

// A number column in its field's own width, filled from FieldValue::bits.
class NumberColumn {
 public:
  void append(abi::FieldType type, const uint64_t* bits, size_t rows) {
    with_number_type(type, [&](auto t) { put<decltype(t)>(bits, rows); });
  }
  py::array finish(abi::FieldType type) && {
    return with_number_type(
        type, [&](auto t) -> py::array { return adopt<decltype(t)>(std::move(bytes_)); });
  }

 private:
  // Signed integers arrive sign-extended, floats as IEEE double bits, bools as 0 or 1.
  template <class T>
  void put(const uint64_t* bits, size_t rows) {
    const size_t at = bytes_.size();
    bytes_.resize(at + rows * sizeof(T));
    T* out = reinterpret_cast<T*>(bytes_.data() + at);
    for (size_t i = 0; i < rows; ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        out[i] = static_cast<T>(std::bit_cast<double>(bits[i]));
      } else {
        out[i] = static_cast<T>(bits[i]);
      }
    }
  }

  ColumnArray<char> bytes_;
};

// An enum field with value names as categories: the name where the value has one, the
// number otherwise (as dump --json). Values of one name share its category.
class EnumCategories {
 public:
  int32_t code(const FieldColumn& c, size_t row) {
    const uint64_t bits = c.bits[row];
    auto it = of_value_.find(bits);
    if (it != of_value_.end()) return it->second;
    const std::string* name = c.info.name_of(bits);
    const std::string key = name != nullptr ? "n" + *name : "v" + std::to_string(bits);
    const int32_t code = list_.code(key, [&] { return value_object(c.info, c.value_at(row)); });
    of_value_.emplace(bits, code);
    return code;
  }
  size_t size() const { return list_.size(); }
  py::array array() { return list_.array(); }

 private:
  std::unordered_map<uint64_t, int32_t> of_value_;
  CategoryList list_;
};

// What makes the Python categories of string columns: one per reader dictionary.
using StringCategoryMap = std::unordered_map<const StringDictionary*, StringCategories>;

// One field's final column as it fills.
class FieldOut {
 public:
  // Appends column c's rows; a string column's categories must be up to date with its
  // dictionary.
  void gather(const FieldColumn& c, size_t rows, StringCategoryMap& strings) {
    if (c.is_string()) {
      StringCategories& categories = strings[c.dictionary.get()];
      const int32_t* of_entry = categories.codes();
      const uint32_t* raw = c.codes.data();
      codes_.append(rows, categories.size(), [&](size_t i) { return of_entry[raw[i]]; });
    } else if (!c.info.value_names.empty()) {
      for (size_t i = 0; i < rows; ++i) enum_codes_.push_back(enums_.code(c, i));
      codes_.append(rows, enums_.size(), [&](size_t i) { return enum_codes_[i]; });
      enum_codes_.clear();
    } else {
      numbers_.append(c.info.type, c.bits.data(), rows);
    }
  }

  // c: the column of the last batch (its dictionary's categories are the column's).
  py::object finish(const FieldColumn& c, StringCategoryMap& strings) && {
    const FieldInfo& info = c.info;
    if (c.is_string()) {
      StringCategories& categories = strings[c.dictionary.get()];
      categories.update(*c.dictionary);
      return categorical(std::move(codes_).finish(categories.size()), categories.array());
    }
    if (!info.value_names.empty()) {
      return categorical(std::move(codes_).finish(enums_.size()), enums_.array());
    }
    return std::move(numbers_).finish(info.type);
  }

 private:
  NumberColumn numbers_;
  CodeColumn codes_;
  EnumCategories enums_;
  std::vector<int32_t> enum_codes_;  // a batch's, before they are narrowed
};

// Sequence numbers as uint32 while they fit (a thread's first 4 Gi records: 4 bytes a row
// less), widened to uint64 (a copy of the rows before, once) when one does not.
class SeqColumn {
 public:
  void append(const uint64_t* seq, size_t rows) {
    if (!wide_) {
      const size_t at = narrow_values_.size();
      narrow_values_.resize(at + rows);
      uint32_t* out = narrow_values_.data() + at;
      uint64_t high = 0;
      for (size_t i = 0; i < rows; ++i) {
        out[i] = static_cast<uint32_t>(seq[i]);
        high |= seq[i] >> 32;
      }
      if (high == 0) return;
      narrow_values_.resize(at);
      wide_ = true;
      wide_values_.resize(at);
      for (size_t i = 0; i < at; ++i) wide_values_[i] = narrow_values_[i];
      narrow_values_ = ColumnArray<uint32_t>();
    }
    wide_values_.append(seq, rows);
  }
  py::array finish() && {
    return wide_ ? adopt<uint64_t>(std::move(wide_values_))
                 : adopt<uint32_t>(std::move(narrow_values_));
  }

 private:
  bool wide_ = false;
  ColumnArray<uint32_t> narrow_values_;
  ColumnArray<uint64_t> wide_values_;
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

// One table's columns in their final form, filled batch by batch.
class TableColumns {
 public:
  // Appends batch table t's rows. tids, pids: per thread index of the batch.
  void gather(const EventTable& t, const std::vector<uint32_t>& tids,
              const std::vector<uint32_t>* pids, bool row_order, StringCategoryMap& strings) {
    if (fields_.empty()) fields_.resize(t.fields.size());
    const size_t rows = t.rows(), at = time_ns_.size();
    if (rows == 0) return;
    time_ns_.append(t.time_ns.data(), rows);
    seq_.append(t.seq.data(), rows);
    if (row_order) order_.append(t.order.data(), rows);
    const uint32_t* thread = t.thread.data();
    tid_.resize(at + rows);
    for (size_t i = 0; i < rows; ++i) tid_[at + i] = tids[thread[i]];
    if (pids != nullptr) {
      pid_.resize(at + rows);
      for (size_t i = 0; i < rows; ++i) pid_[at + i] = (*pids)[thread[i]];
    }
    for (size_t j = 0; j < t.fields.size(); ++j) fields_[j].gather(t.fields[j], rows, strings);
  }

  // The columns, named: time_ns, pid, tid, seq, then one per field.
  py::dict finish(const EventTable& t, std::optional<uint32_t> one_pid,
                  StringCategoryMap& strings) && {
    const size_t rows = time_ns_.size();
    py::dict columns;
    columns["time_ns"] = adopt<uint64_t>(std::move(time_ns_));
    columns["pid"] =
        one_pid ? constant_column<uint32_t>(*one_pid, rows) : adopt<uint32_t>(std::move(pid_));
    columns["tid"] = adopt<uint32_t>(std::move(tid_));
    columns["seq"] = std::move(seq_).finish();
    fields_.resize(t.fields.size());
    for (size_t j = 0; j < t.fields.size(); ++j) {
      const FieldColumn& c = t.fields[j];
      columns[py::str(text(column_name(c.info.name)))] = std::move(fields_[j]).finish(c, strings);
    }
    return columns;
  }

  py::array order() && { return adopt<uint64_t>(std::move(order_)); }

 private:
  ColumnArray<uint64_t> time_ns_, order_;
  SeqColumn seq_;
  ColumnArray<uint32_t> tid_, pid_;
  std::vector<FieldOut> fields_;
};

// Brings the categories of every dictionary of batch up to date.
void update_categories(const ColumnSet& batch, StringCategoryMap& strings) {
  for (const EventTable& t : batch.tables) {
    for (const FieldColumn& f : t.fields) {
      if (f.is_string()) strings[f.dictionary.get()].update(*f.dictionary);
    }
  }
}

// Rows per batch: the batch's columns stay in cache while their values are moved on.
constexpr size_t kBatchRows = 16 << 10;

}  // namespace

py::object column_object(const FieldColumn& column, size_t rows) {
  StringCategoryMap strings;
  if (column.is_string()) strings[column.dictionary.get()].update(*column.dictionary);
  FieldOut out;
  out.gather(column, rows, strings);
  return std::move(out).finish(column, strings);
}

py::tuple read_tables(Trace& trace, const std::vector<std::string>& events, bool row_order) {
  ColumnOptions options;
  options.events = events;
  options.row_order = row_order;
  options.max_dictionary_entries = 0;  // one dictionary per field for the whole trace
  std::unique_ptr<ColumnReader> reader = take(ColumnReader::open(trace, options));
  ColumnSet batch;
  std::vector<TableColumns> out;
  StringCategoryMap strings;
  std::vector<uint32_t> tids, pids;
  std::optional<uint32_t> one_pid;
  for (bool first = true;; first = false) {
    bool more;
    {
      py::gil_scoped_release unlocked;
      more = reader->next(&batch, kBatchRows);
    }
    if (first) {
      // The thread streams are all known from the first batch on.
      out.resize(batch.tables.size());
      for (const ThreadStats& t : batch.threads) tids.push_back(t.info.tid);
      pids = batch.thread_pid;
      bool one_process = true;
      for (uint32_t pid : pids) one_process = one_process && pid == pids[0];
      if (one_process) one_pid = pids.empty() ? 0 : pids[0];
    }
    if (!more) break;
    update_categories(batch, strings);
    for (size_t k = 0; k < batch.tables.size(); ++k) {
      out[k].gather(batch.tables[k], tids, one_pid ? nullptr : &pids, row_order, strings);
    }
  }
  StringCategories names;
  names.update(*batch.event_names);
  py::dict tables, orders, event_codes;
  for (size_t k = 0; k < batch.tables.size(); ++k) {
    const EventTable& t = batch.tables[k];
    // Call sites of one name with different fields: "name", "name#2", ...
    std::string key = t.name;
    for (int n = 2; tables.contains(py::str(text(key))); ++n) {
      key = t.name + "#" + std::to_string(n);
    }
    py::str name = text(key);
    if (row_order) orders[name] = std::move(out[k]).order();
    tables[name] = std::move(out[k]).finish(t, one_pid, strings);
    event_codes[name] = names.codes()[t.name_code];
  }
  return py::make_tuple(tables, orders, event_codes, names.array());
}

}  // namespace nanotrace::python
