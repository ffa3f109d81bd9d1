// Dictionary-encoded columns of the Python module: codes (an int8, int16 or int32 ndarray,
// the width pandas' Categorical gives that many categories, so that it adopts them as they
// are) into categories (a read-only object ndarray of distinct values, each one Python
// object). The package wraps each (codes, categories) pair as a nanotrace.Categorical or a
// pandas.Categorical without a copy. No table holds a Python object per row.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nanotrace/columns.hpp"
#include "python/py_common.hpp"

namespace nanotrace::python {

// The code width, in bytes, for `categories` categories: 1, 2 or 4, as pandas chooses it.
int code_width(size_t categories);

// Calls f(T{}) with T the signed integer type of `width` bytes.
template <class F>
decltype(auto) with_code_type(int width, F&& f) {
  if (width == 1) return f(int8_t{});
  if (width == 2) return f(int16_t{});
  return f(int32_t{});
}

// The distinct values of a column as Python objects, each once, in the order first seen.
class CategoryList {
 public:
  // The code of the category named `key`: an existing one, or a new one holding make().
  template <class Make>
  int32_t code(std::string_view key, Make&& make) {
    auto it = codes_.find(std::string(key));
    if (it != codes_.end()) return it->second;
    const auto code = static_cast<int32_t>(values_.size());
    values_.push_back(make());
    codes_.emplace(std::string(key), code);
    return code;
  }
  size_t size() const { return values_.size(); }
  // The categories as a read-only object ndarray (one array: every column sharing this list
  // shares it).
  py::array array();

 private:
  std::vector<py::object> values_;
  std::unordered_map<std::string, int32_t> codes_;
  py::object array_;  // made once
};

// StringDictionaries' entries as categories: str, valid UTF-8 as `dump --json` prints them
// (utf8::valid). Entries whose bytes differ only where they are ill-formed read alike then,
// and share one category. Several dictionaries (one per part of a read, each of the same
// field) feed one list: an entry of the second that the first has maps to its category.
class StringCategories {
 public:
  // Takes the entries added to `dictionary` since the last call for it; returns, per entry
  // of it, its category's code.
  const std::vector<int32_t>& update(const StringDictionary& dictionary);
  // Per entry of the dictionary updated first: its category's code.
  const int32_t* codes() const { return of_entry_.empty() ? nullptr : of_entry_[0].second.data(); }
  size_t size() const { return list_.size(); }
  py::array array() { return list_.array(); }

 private:
  std::vector<std::pair<const StringDictionary*, std::vector<int32_t>>> of_entry_;
  CategoryList list_;
};

// A column of codes as it fills, in the width its categories need so far: widened (a copy of
// the rows before) when they outgrow it, which a column does at most twice.
class CodeColumn {
 public:
  // Appends `rows` codes, code(i) for row i, with `categories` categories so far.
  template <class F>
  void append(size_t rows, size_t categories, F&& code) {
    const int need = code_width(categories);
    if (need > width_) widen(need);
    bytes_.resize((rows_ + rows) * static_cast<size_t>(width_));
    with_code_type(width_, [&](auto type) {
      using T = decltype(type);
      T* out = reinterpret_cast<T*>(bytes_.data()) + rows_;
      for (size_t i = 0; i < rows; ++i) out[i] = static_cast<T>(code(i));
    });
    rows_ += rows;
  }
  size_t rows() const { return rows_; }
  // Calls f(codes, rows) with the codes in their type (int8_t, int16_t or int32_t).
  template <class F>
  void visit(F&& f) const {
    with_code_type(width_, [&](auto type) {
      f(reinterpret_cast<const decltype(type)*>(bytes_.data()), rows_);
    });
  }
  // The codes as an ndarray (owning their memory) of the width for `categories`.
  py::array finish(size_t categories) &&;

 private:
  void widen(int width);
  ColumnArray<char> bytes_;
  int width_ = 1;
  size_t rows_ = 0;
};

// The (codes, categories) pair the package wraps as a Categorical.
py::tuple categorical(py::array codes, py::array categories);

// A column of one of a few fixed names: codes index[i] into names.
py::tuple fixed_categorical(const std::vector<std::string>& names,
                            const ColumnArray<uint8_t>& index);

}  // namespace nanotrace::python
