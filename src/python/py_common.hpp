// What the Python bindings share: turning a Status into the module's exception, trace text
// (untrusted bytes) into Python str, a field value into the Python object that equals what
// `nanotrace dump --json` prints for it, and a column's memory into an ndarray.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "nanotrace/columns.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::python {

namespace py = pybind11;

// Raised for every Status error; the module registers it as nanotrace.Error (a RuntimeError).
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws Error("nanotrace: MESSAGE") unless status is ok.
void check(const Status& status);
template <class T>
T take(Result<T>&& result) {
  check(result.status());
  return std::move(*result);
}

// Text from a trace as str: ill-formed UTF-8 becomes U+FFFD exactly as in the JSON output.
py::str text(std::string_view bytes);
// A new reference to the same str (for filling object arrays).
PyObject* new_text(std::string_view bytes);

// A field value as dump --json shows it: an enum value with a name as that name (str), strings
// as str, signed integers as int, unsigned integers and pointers as int (dump prints pointers in
// hex), floats as float (NaN and infinities included), bools as bool.
py::object value_object(const FieldInfo& field, const FieldValue& value);

// An ndarray of dtype T over v's elements (v's memory as T's: `bytes` may be a ColumnArray of
// char holding Ts), owning v: no copy, and numpy never reallocates it.
template <class T, class U>
py::array adopt(ColumnArray<U>&& v) {
  static_assert(sizeof(U) == 1 || sizeof(T) == sizeof(U));
  auto* holder = new ColumnArray<U>(std::move(v));
  py::capsule owner(holder, [](void* p) { delete static_cast<ColumnArray<U>*>(p); });
  const auto n = static_cast<py::ssize_t>(holder->size() * sizeof(U) / sizeof(T));
  return py::array(py::dtype::of<T>(), {n}, {static_cast<py::ssize_t>(sizeof(T))},
                   reinterpret_cast<const T*>(holder->data()), owner);
}

}  // namespace nanotrace::python
