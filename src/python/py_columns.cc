// Trace.events() in C++: the trace read in batches of columns (ColumnReader, GIL released),
// each batch's values moved into the final columns, which numpy then adopts. A column of
// integers, floats, times or sequence numbers becomes an ndarray over its own ColumnArray (no
// copy: a capsule owns it); strings, enum names, thread and event names become object arrays
// of str, one str object shared by the rows of equal text, their slots in a ColumnArray too
// (numpy's own allocation would fault its pages in 4 KiB at a time).
//
// On a VM, fresh memory is most of what a load costs (the kernel zeroes each new page, and
// the hypervisor backs it): only the final columns take new memory; a batch's own columns
// (the strings' bytes and offsets among them) are reused from batch to batch while in cache.
#include "python/py_columns.hpp"

#include <pybind11/numpy.h>

#include <bit>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "nanotrace/columns.hpp"
#include "python/py_common.hpp"

namespace nanotrace::python {
namespace {

// An ndarray of dtype T over v's elements (same size as T), owning v.
template <class T, class U>
py::array adopt(ColumnArray<U>&& v) {
  static_assert(sizeof(T) == sizeof(U));
  auto* holder = new ColumnArray<U>(std::move(v));
  py::capsule owner(holder, [](void* p) { delete static_cast<ColumnArray<U>*>(p); });
  const auto n = static_cast<py::ssize_t>(holder->size());
  return py::array(py::dtype::of<T>(), {n}, {static_cast<py::ssize_t>(sizeof(T))},
                   reinterpret_cast<const T*>(holder->data()), owner);
}

// An object array over slots (new references), which it owns; the owner releases what the
// slots hold when the array goes.
py::array object_array(ColumnArray<PyObject*>&& slots) {
  auto* holder = new ColumnArray<PyObject*>(std::move(slots));
  py::capsule owner(holder, [](void* p) {
    auto* held = static_cast<ColumnArray<PyObject*>*>(p);
    for (PyObject* o : *held) Py_XDECREF(o);
    delete held;
  });
  const auto n = static_cast<py::ssize_t>(holder->size());
  const auto stride = static_cast<py::ssize_t>(sizeof(PyObject*));
  return py::array(py::dtype("O"), {n}, {stride}, holder->data(), owner);
}

// An object array being filled: its slots are in a ColumnArray that the array owns once
// made.
class ObjectColumn {
 public:
  explicit ObjectColumn(size_t rows) { slots_.resize(rows); }
  // Stores a new reference in slot i (empty until now).
  void set(size_t i, PyObject* value) { slots_[i] = value; }
  py::array finish() && { return object_array(std::move(slots_)); }

 private:
  ColumnArray<PyObject*> slots_;
};

// Rows of equal text share one str. The cache stops growing past a bound: a column of
// distinct strings then costs a lookup per row and no more memory. It keeps its own copy of
// the bytes: a batch's text is overwritten by the next one.
class TextCache {
 public:
  TextCache() = default;
  TextCache(TextCache&&) = default;  // the moved-from cache is left empty
  TextCache(const TextCache&) = delete;
  TextCache& operator=(const TextCache&) = delete;
  ~TextCache() {
    for (auto& [bytes, s] : cache_) Py_DECREF(s);
  }
  PyObject* get(std::string_view bytes) {  // a new reference
    auto it = cache_.find(bytes);
    if (it != cache_.end()) {
      Py_INCREF(it->second);
      return it->second;
    }
    PyObject* s = new_text(bytes);
    if (cache_.size() < kMaxEntries) {
      cache_.emplace(std::string(bytes), s);
      Py_INCREF(s);
    }
    return s;
  }

 private:
  static constexpr size_t kMaxEntries = 1 << 16;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view v) const { return std::hash<std::string_view>()(v); }
  };
  std::unordered_map<std::string, PyObject*, Hash, std::equal_to<>> cache_;
};

py::array string_column(const FieldColumn& f, size_t rows) {
  ObjectColumn out(rows);
  TextCache cache;
  for (size_t i = 0; i < rows; ++i) out.set(i, cache.get(f.string_at(i)));
  return std::move(out).finish();
}

// An enum with value names: the name where the value has one, the number otherwise.
py::array enum_column(const FieldColumn& f, size_t rows) {
  ObjectColumn out(rows);
  std::unordered_map<uint64_t, py::object> values;
  for (size_t i = 0; i < rows; ++i) {
    auto it = values.find(f.bits[i]);
    if (it == values.end()) {
      it = values.emplace(f.bits[i], value_object(f.info, f.value_at(i))).first;
    }
    out.set(i, it->second.inc_ref().ptr());
  }
  return std::move(out).finish();
}

// A column of numbers in the field's own width: a u32 field is a uint32 array, an f32 field
// a float32 one (memory per row is what a load costs most). Filled from FieldValue::bits.
class NumberColumn {
 public:
  void append(abi::FieldType type, const uint64_t* bits, size_t rows) {
    using abi::FieldType;
    switch (type) {
      case FieldType::kI8:
        return put<int8_t>(bits, rows);
      case FieldType::kI16:
        return put<int16_t>(bits, rows);
      case FieldType::kI32:
        return put<int32_t>(bits, rows);
      case FieldType::kI64:
        return put<int64_t>(bits, rows);
      case FieldType::kU8:
        return put<uint8_t>(bits, rows);
      case FieldType::kU16:
        return put<uint16_t>(bits, rows);
      case FieldType::kU32:
        return put<uint32_t>(bits, rows);
      case FieldType::kF32:
        return put<float>(bits, rows);
      case FieldType::kF64:
        return put<double>(bits, rows);
      default:
        return put<uint64_t>(bits, rows);  // u64 and pointers
    }
  }

  py::array finish(abi::FieldType type) && {
    using abi::FieldType;
    switch (type) {
      case FieldType::kI8:
        return adopt_bytes<int8_t>();
      case FieldType::kI16:
        return adopt_bytes<int16_t>();
      case FieldType::kI32:
        return adopt_bytes<int32_t>();
      case FieldType::kI64:
        return adopt_bytes<int64_t>();
      case FieldType::kU8:
        return adopt_bytes<uint8_t>();
      case FieldType::kU16:
        return adopt_bytes<uint16_t>();
      case FieldType::kU32:
        return adopt_bytes<uint32_t>();
      case FieldType::kF32:
        return adopt_bytes<float>();
      case FieldType::kF64:
        return adopt_bytes<double>();
      default:
        return adopt_bytes<uint64_t>();
    }
  }

 private:
  // Signed integers arrive sign-extended and floats as IEEE double bits.
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

  template <class T>
  py::array adopt_bytes() {
    auto* holder = new ColumnArray<char>(std::move(bytes_));
    py::capsule owner(holder, [](void* p) { delete static_cast<ColumnArray<char>*>(p); });
    const auto n = static_cast<py::ssize_t>(holder->size() / sizeof(T));
    return py::array(py::dtype::of<T>(), {n}, {static_cast<py::ssize_t>(sizeof(T))},
                     reinterpret_cast<const T*>(holder->data()), owner);
  }

  ColumnArray<char> bytes_;
};

py::array field_column(FieldColumn& f, size_t rows) {
  if (f.is_string()) return string_column(f, rows);
  if (!f.info.value_names.empty()) return enum_column(f, rows);
  if (f.info.type == abi::FieldType::kBool) {
    ColumnArray<bool> out;
    out.resize(rows);
    for (size_t i = 0; i < rows; ++i) out[i] = f.bits[i] != 0;
    return adopt<bool>(std::move(out));
  }
  NumberColumn numbers;
  numbers.append(f.info.type, f.bits.data(), rows);
  return std::move(numbers).finish(f.info.type);
}

// A read-only column of `rows` times the same value: one element, stride 0 (no memory per
// row; pandas copies it when it builds a frame).
template <class T>
py::array constant_column(T value, size_t rows) {
  ColumnArray<T> one;
  one.push_back(value);
  auto* holder = new ColumnArray<T>(std::move(one));
  py::capsule owner(holder, [](void* p) {
    auto* a = static_cast<ColumnArray<T>*>(p);
    if constexpr (std::is_same_v<T, PyObject*>) Py_XDECREF((*a)[0]);
    delete a;
  });
  py::dtype dtype = std::is_same_v<T, PyObject*> ? py::dtype("O") : py::dtype::of<T>();
  py::array out(dtype, {static_cast<py::ssize_t>(rows)}, {py::ssize_t{0}}, holder->data(), owner);
  out.attr("setflags")(py::arg("write") = false);
  return out;
}

const char* const kFixedColumns[] = {"time_ns", "pid", "tid", "seq", "event"};

// A field whose name is a fixed column's keeps its name under "fields." (as in dump's JSON).
std::string column_name(const std::string& field) {
  for (const char* fixed : kFixedColumns) {
    if (field == fixed) return "fields." + field;
  }
  return field;
}

// One table's columns in their final form, filled batch by batch.
class TableColumns {
 public:
  // Appends batch table t's rows. tids, pids: per thread index of the batch.
  void gather(EventTable& t, const std::vector<uint32_t>& tids, const std::vector<uint32_t>* pids,
              bool row_order) {
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
    for (size_t j = 0; j < t.fields.size(); ++j) gather_field(t.fields[j], rows, at, &fields_[j]);
  }

  // The columns, named: time_ns, pid, tid, seq, event, then one per field.
  py::dict finish(const EventTable& t, std::optional<uint32_t> one_pid, const py::str& name) && {
    const size_t rows = time_ns_.size();
    py::dict columns;
    columns["time_ns"] = adopt<uint64_t>(std::move(time_ns_));
    columns["pid"] =
        one_pid ? constant_column<uint32_t>(*one_pid, rows) : adopt<uint32_t>(std::move(pid_));
    columns["tid"] = adopt<uint32_t>(std::move(tid_));
    columns["seq"] = adopt<uint64_t>(std::move(seq_));
    columns["event"] = constant_column<PyObject*>(name.inc_ref().ptr(), rows);
    fields_.resize(t.fields.size());
    for (size_t j = 0; j < t.fields.size(); ++j) {
      const FieldInfo& info = t.fields[j].info;
      Field& f = fields_[j];
      py::array column;
      if (info.type == abi::FieldType::kString || !info.value_names.empty()) {
        column = object_array(std::move(f.objects));
      } else if (info.type == abi::FieldType::kBool) {
        column = adopt<bool>(std::move(f.flags));
      } else {
        column = std::move(f.numbers).finish(info.type);
      }
      columns[py::str(text(column_name(info.name)))] = column;
    }
    return columns;
  }

  py::array order() && { return adopt<uint64_t>(std::move(order_)); }

 private:
  struct Field {
    NumberColumn numbers;
    ColumnArray<bool> flags;
    ColumnArray<PyObject*> objects;  // strings, enums: new references
    TextCache texts;
    std::unordered_map<uint64_t, py::object> names;  // enums: by value
  };

  void gather_field(const FieldColumn& c, size_t rows, size_t at, Field* f) {
    if (c.is_string()) {
      f->objects.resize(at + rows);
      for (size_t i = 0; i < rows; ++i) f->objects[at + i] = f->texts.get(c.string_at(i));
    } else if (!c.info.value_names.empty()) {
      // An enum with value names: the name where the value has one, the number otherwise.
      f->objects.resize(at + rows);
      for (size_t i = 0; i < rows; ++i) {
        auto it = f->names.find(c.bits[i]);
        if (it == f->names.end()) {
          it = f->names.emplace(c.bits[i], value_object(c.info, c.value_at(i))).first;
        }
        f->objects[at + i] = it->second.inc_ref().ptr();
      }
    } else if (c.info.type == abi::FieldType::kBool) {
      f->flags.resize(at + rows);
      for (size_t i = 0; i < rows; ++i) f->flags[at + i] = c.bits[i] != 0;
    } else {
      f->numbers.append(c.info.type, c.bits.data(), rows);
    }
  }

  ColumnArray<uint64_t> time_ns_, seq_, order_;
  ColumnArray<uint32_t> tid_, pid_;
  std::vector<Field> fields_;
};

// Rows per batch: the batch's columns stay in cache while their values are moved on.
constexpr size_t kBatchRows = 16 << 10;

}  // namespace

py::array column_array(FieldColumn& column, size_t rows) { return field_column(column, rows); }

py::array repeated_objects(const std::vector<py::object>& values,
                           const ColumnArray<uint8_t>& index) {
  ObjectColumn out(index.size());
  for (size_t i = 0; i < index.size(); ++i) out.set(i, values[index[i]].inc_ref().ptr());
  return std::move(out).finish();
}

py::tuple read_tables(Trace& trace, const std::vector<std::string>& events, bool row_order) {
  ColumnOptions options;
  options.events = events;
  options.row_order = row_order;
  std::unique_ptr<ColumnReader> reader = take(ColumnReader::open(trace, options));
  ColumnSet batch;
  std::vector<TableColumns> out;
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
    for (size_t k = 0; k < batch.tables.size(); ++k) {
      out[k].gather(batch.tables[k], tids, one_pid ? nullptr : &pids, row_order);
    }
  }
  py::dict tables, orders;
  for (size_t k = 0; k < batch.tables.size(); ++k) {
    const EventTable& t = batch.tables[k];
    // Call sites of one name with different fields: "name", "name#2", ...
    std::string key = t.name;
    for (int n = 2; tables.contains(py::str(text(key))); ++n)
      key = t.name + "#" + std::to_string(n);
    py::str name = text(key);
    if (row_order) orders[name] = std::move(out[k]).order();
    tables[name] = std::move(out[k]).finish(t, one_pid, text(t.name));
  }
  return py::make_tuple(tables, orders);
}

}  // namespace nanotrace::python
