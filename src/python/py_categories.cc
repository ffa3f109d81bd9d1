// Dictionary-encoded columns of the Python module (py_categories.hpp).
#include "python/py_categories.hpp"

#include "base/utf8.hpp"

namespace nanotrace::python {

int code_width(size_t categories) {
  // pandas' coerce_indexer_dtype: fewer than the type's maximum, so that -1 (absent) and
  // every code fit.
  if (categories < 127) return 1;
  if (categories < 32767) return 2;
  return 4;
}

py::array CategoryList::array() {
  if (!array_ || py::len(array_) != values_.size()) {
    py::array out(py::dtype("O"),
                  std::vector<py::ssize_t>{static_cast<py::ssize_t>(values_.size())},
                  std::vector<py::ssize_t>{});
    auto** slots = static_cast<PyObject**>(out.mutable_data());
    for (size_t i = 0; i < values_.size(); ++i) {
      Py_XDECREF(slots[i]);  // numpy fills a new object array with None
      slots[i] = values_[i].inc_ref().ptr();
    }
    out.attr("setflags")(py::arg("write") = false);
    array_ = out;
  }
  return py::reinterpret_borrow<py::array>(array_);
}

const std::vector<int32_t>& StringCategories::update(const StringDictionary& dictionary) {
  size_t d = 0;
  while (d < of_entry_.size() && of_entry_[d].first != &dictionary) ++d;
  if (d == of_entry_.size()) of_entry_.emplace_back(&dictionary, std::vector<int32_t>());
  std::vector<int32_t>& codes = of_entry_[d].second;
  std::string repaired;
  for (size_t e = codes.size(); e < dictionary.size(); ++e) {
    std::string_view s = dictionary[static_cast<uint32_t>(e)];
    if (!utf8::is_valid(s)) s = repaired = utf8::valid(s);
    codes.push_back(list_.code(s, [&] { return py::object(text(s)); }));
  }
  return codes;
}

void CodeColumn::widen(int width) {
  ColumnArray<char> wider;
  wider.resize(rows_ * static_cast<size_t>(width));
  with_code_type(width_, [&](auto from_type) {
    using From = decltype(from_type);
    const From* from = reinterpret_cast<const From*>(bytes_.data());
    with_code_type(width, [&](auto to_type) {
      using To = decltype(to_type);
      To* to = reinterpret_cast<To*>(wider.data());
      for (size_t i = 0; i < rows_; ++i) to[i] = from[i];
    });
  });
  bytes_ = std::move(wider);
  width_ = width;
}

py::array CodeColumn::finish(size_t categories) && {
  const int need = code_width(categories);
  if (need > width_) widen(need);
  bytes_.resize(rows_ * static_cast<size_t>(width_));
  return with_code_type(
      width_, [&](auto type) -> py::array { return adopt<decltype(type)>(std::move(bytes_)); });
}

py::tuple categorical(py::array codes, py::array categories) {
  return py::make_tuple(std::move(codes), std::move(categories));
}

py::tuple fixed_categorical(const std::vector<std::string>& names,
                            const ColumnArray<uint8_t>& index) {
  CategoryList list;
  for (const std::string& n : names) list.code(n, [&] { return py::object(text(n)); });
  CodeColumn codes;
  codes.append(index.size(), names.size(), [&](size_t i) { return index[i]; });
  return categorical(std::move(codes).finish(names.size()), list.array());
}

}  // namespace nanotrace::python
