// Status to exception, trace text to str, field values to Python objects (py_common.hpp).
#include "python/py_common.hpp"

#include "base/utf8.hpp"

namespace nanotrace::python {

void check(const Status& status) {
  if (!status.ok()) throw Error("nanotrace: " + status.message());
}

PyObject* new_text(std::string_view bytes) {
  PyObject* s;
  if (utf8::is_valid(bytes)) {
    s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "strict");
  } else {
    std::string repaired = utf8::valid(bytes);
    s = PyUnicode_DecodeUTF8(repaired.data(), static_cast<Py_ssize_t>(repaired.size()), "strict");
  }
  if (s == nullptr) throw py::error_already_set();
  return s;
}

py::str text(std::string_view bytes) { return py::reinterpret_steal<py::str>(new_text(bytes)); }

py::object value_object(const FieldInfo& field, const FieldValue& value) {
  using abi::FieldType;
  if (!field.value_names.empty() && value.type != FieldType::kString) {
    if (const std::string* name = field.name_of(value.bits)) return text(*name);
  }
  switch (value.type) {
    case FieldType::kI8:
    case FieldType::kI16:
    case FieldType::kI32:
    case FieldType::kI64:
      return py::int_(static_cast<int64_t>(value.bits));
    case FieldType::kF32:
    case FieldType::kF64:
      return py::float_(value.as_double());
    case FieldType::kBool:
      return py::bool_(value.bits != 0);
    case FieldType::kString:
      return text(value.text);
    default:
      return py::int_(value.bits);
  }
}

}  // namespace nanotrace::python
