// Trace.events() in C++: read_columns() (GIL released), then each column handed to numpy. A
// column of integers, floats, times or sequence numbers becomes an ndarray over the reader's
// own ColumnArray (no copy: a capsule owns it); strings, enum names, thread and event names
// become object arrays of str, one str object shared by the rows of equal text, their slots
// in a ColumnArray too (numpy's own allocation would fault its pages in 4 KiB at a time).
#include "python/py_columns.hpp"

#include <pybind11/numpy.h>

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

// An object array being filled: its slots are in a ColumnArray that the array owns once
// made; the owner releases what the slots hold when the array goes.
class ObjectColumn {
 public:
  explicit ObjectColumn(size_t rows) { slots_.resize(rows); }
  // Stores a new reference in slot i (empty until now).
  void set(size_t i, PyObject* value) { slots_[i] = value; }
  py::array finish() && {
    auto* holder = new ColumnArray<PyObject*>(std::move(slots_));
    py::capsule owner(holder, [](void* p) {
      auto* slots = static_cast<ColumnArray<PyObject*>*>(p);
      for (PyObject* o : *slots) Py_XDECREF(o);
      delete slots;
    });
    const auto n = static_cast<py::ssize_t>(holder->size());
    const auto stride = static_cast<py::ssize_t>(sizeof(PyObject*));
    return py::array(py::dtype("O"), {n}, {stride}, holder->data(), owner);
  }

 private:
  ColumnArray<PyObject*> slots_;
};

// Rows of equal text share one str. The cache stops growing past a bound: a column of
// distinct strings then costs a lookup per row and no more memory.
class TextCache {
 public:
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
      cache_.emplace(bytes, s);  // bytes live in the column's text, longer than the cache
      Py_INCREF(s);
    }
    return s;
  }

 private:
  static constexpr size_t kMaxEntries = 1 << 16;
  std::unordered_map<std::string_view, PyObject*> cache_;
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

py::array field_column(FieldColumn& f, size_t rows) {
  using abi::FieldType;
  if (f.is_string()) return string_column(f, rows);
  if (!f.info.value_names.empty()) return enum_column(f, rows);
  switch (f.info.type) {
    case FieldType::kI8:
    case FieldType::kI16:
    case FieldType::kI32:
    case FieldType::kI64:
      return adopt<int64_t>(std::move(f.bits));
    case FieldType::kF32:
    case FieldType::kF64:
      return adopt<double>(std::move(f.bits));  // stored as IEEE double bits
    case FieldType::kBool: {
      ColumnArray<bool> out;
      out.resize(rows);
      for (size_t i = 0; i < rows; ++i) out[i] = f.bits[i] != 0;
      return adopt<bool>(std::move(out));
    }
    default:  // unsigned integers and pointers
      return adopt<uint64_t>(std::move(f.bits));
  }
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

py::dict table_columns(EventTable& t, const ColumnSet& set, const py::str& name) {
  const size_t rows = t.rows();
  py::dict columns;
  columns["time_ns"] = adopt<uint64_t>(std::move(t.time_ns));
  bool one_process = true;
  for (uint32_t pid : set.thread_pid) one_process = one_process && pid == set.thread_pid[0];
  if (one_process) {
    columns["pid"] =
        constant_column<uint32_t>(set.thread_pid.empty() ? 0 : set.thread_pid[0], rows);
  } else {
    ColumnArray<uint32_t> pid;
    pid.resize(rows);
    for (size_t i = 0; i < rows; ++i) pid[i] = set.thread_pid[t.thread[i]];
    columns["pid"] = adopt<uint32_t>(std::move(pid));
  }
  // The thread indexes become the thread ids in place.
  for (size_t i = 0; i < rows; ++i) t.thread[i] = set.threads[t.thread[i]].info.tid;
  columns["tid"] = adopt<uint32_t>(std::move(t.thread));
  columns["seq"] = adopt<uint64_t>(std::move(t.seq));
  columns["event"] = constant_column<PyObject*>(name.inc_ref().ptr(), rows);
  for (FieldColumn& f : t.fields) {
    columns[py::str(text(column_name(f.info.name)))] = field_column(f, rows);
  }
  return columns;
}

}  // namespace

py::array column_array(FieldColumn& column, size_t rows) { return field_column(column, rows); }

py::array repeated_objects(const std::vector<py::object>& values,
                           const ColumnArray<uint8_t>& index) {
  ObjectColumn out(index.size());
  for (size_t i = 0; i < index.size(); ++i) out.set(i, values[index[i]].inc_ref().ptr());
  return std::move(out).finish();
}

py::tuple read_tables(Trace& trace, const std::vector<std::string>& events, bool row_order) {
  Result<ColumnSet> read = [&] {
    py::gil_scoped_release unlocked;
    return read_columns(trace, ColumnOptions{events, row_order});
  }();
  ColumnSet set = take(std::move(read));
  py::dict tables, orders;
  for (EventTable& t : set.tables) {
    // Call sites of one name with different fields: "name", "name#2", ...
    std::string key = t.name;
    for (int n = 2; tables.contains(py::str(text(key))); ++n)
      key = t.name + "#" + std::to_string(n);
    py::str name = text(key);
    if (row_order) orders[name] = adopt<uint64_t>(std::move(t.order));
    tables[name] = table_columns(t, set, text(t.name));
  }
  return py::make_tuple(tables, orders);
}

}  // namespace nanotrace::python
