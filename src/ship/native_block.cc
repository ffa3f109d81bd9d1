// NativeBlock: rows into typed ClickHouse Native columns.
#include "ship/native_block.hpp"

#include <fmt/format.h>

#include "base/utf8.hpp"

namespace nanotrace::ship {
namespace {

constexpr std::pair<ValueType, std::string_view> kTypeNames[] = {
    {ValueType::kUInt8, "UInt8"},   {ValueType::kUInt16, "UInt16"},
    {ValueType::kUInt32, "UInt32"}, {ValueType::kUInt64, "UInt64"},
    {ValueType::kInt64, "Int64"},   {ValueType::kFloat64, "Float64"},
    {ValueType::kDate, "Date"},     {ValueType::kString, "String"}};

std::string_view value_type_name(ValueType v) {
  for (const auto& [type, name] : kTypeNames) {
    if (type == v) return name;
  }
  return "?";
}

}  // namespace

void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::optional<ColumnType> parse_column_type(std::string_view name) {
  ColumnType t;
  if (name.size() > 7 && name.substr(0, 6) == "Array(" && name.back() == ')') {
    t.array = true;
    name = name.substr(6, name.size() - 7);
  }
  for (const auto& [type, type_name] : kTypeNames) {
    if (name == type_name) {
      t.value = type;
      return t;
    }
  }
  return std::nullopt;
}

std::string column_type_name(ColumnType type) {
  const std::string_view v = value_type_name(type.value);
  return type.array ? fmt::format("Array({})", v) : std::string(v);
}

size_t NativeBlock::add_column(std::string name, std::string_view type) {
  Column c;
  const std::optional<ColumnType> parsed = parse_column_type(type);
  if (!parsed && bad_type_.empty()) {
    bad_type_ = fmt::format("column {} has type {}, which a Native block cannot hold", name, type);
  }
  c.type = parsed.value_or(ColumnType{});
  c.name = std::move(name);
  c.type_name = std::string(type);
  columns_.push_back(std::move(c));
  return columns_.size() - 1;
}

void NativeBlock::mistyped(size_t column, ValueType given) {
  if (!mistake_.empty()) return;
  const Column& c = columns_[column];
  mistake_ = fmt::format("column {} is {}, not {} (row {})", c.name, c.type_name,
                         value_type_name(given), rows_ + 1);
}

void NativeBlock::put_string(size_t column, std::string_view s) {
  Column& c = columns_[column];
  if (c.type.value != ValueType::kString) [[unlikely]] {
    return mistyped(column, ValueType::kString);
  }
  ++c.elements;
  std::string& d = c.data;
  put_varint(&d, s.size());
  d.append(s);
}

void NativeBlock::put_text(size_t column, std::string_view s) {
  if (utf8::is_valid(s)) return put_string(column, s);
  scratch_.clear();
  utf8::append_valid(scratch_, s);
  put_string(column, scratch_);
}

void NativeBlock::end_array(size_t column) {
  Column& c = columns_[column];
  if (!c.type.array) [[unlikely]] {
    if (mistake_.empty()) mistake_ = fmt::format("column {} is not an array", c.name);
    return;
  }
  const size_t at = c.offsets.size();
  c.offsets.resize(at + sizeof(uint64_t));
  std::memcpy(c.offsets.data() + at, &c.elements, sizeof(uint64_t));
}

size_t NativeBlock::bytes() const {
  size_t n = 0;
  for (const Column& c : columns_) n += c.data.size() + c.offsets.size();
  return n;
}

Status NativeBlock::write(std::string* out) const {
  if (!bad_type_.empty()) return Status::Invalid(bad_type_);
  if (!mistake_.empty()) return Status::Invalid(mistake_);
  for (const Column& c : columns_) {
    const uint64_t per_row = c.type.array ? c.offsets.size() / sizeof(uint64_t) : c.elements;
    if (per_row != rows_) {
      return Status::Invalid(fmt::format("column {} holds {} {} for {} rows", c.name, per_row,
                                         c.type.array ? "arrays" : "values", rows_));
    }
  }
  put_varint(out, columns_.size());
  put_varint(out, rows_);
  for (const Column& c : columns_) {
    put_varint(out, c.name.size());
    out->append(c.name);
    put_varint(out, c.type_name.size());
    out->append(c.type_name);
    out->append(c.offsets);
    out->append(c.data);
  }
  return Status::Ok();
}

void NativeBlock::clear() {
  for (Column& c : columns_) {
    c.data.clear();
    c.offsets.clear();
    c.elements = 0;
  }
  rows_ = 0;
  mistake_.clear();
}

}  // namespace nanotrace::ship
