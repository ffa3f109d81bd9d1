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

void ByteBuffer::grow(size_t need) {
  size_t capacity = capacity_ < 4096 ? 4096 : capacity_ * 2;
  while (capacity < need) capacity *= 2;
  auto* p = static_cast<char*>(std::realloc(data_, capacity));
  if (p == nullptr) std::abort();  // as std::string's operator new would (no exceptions here)
  data_ = p;
  capacity_ = capacity;
}

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
  c.data.append_varint(s.size());
  c.data.append(s.data(), s.size());
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
  c.offsets.append_value(c.elements);
}

size_t NativeBlock::bytes() const {
  size_t n = 0;
  for (const Column& c : columns_) n += c.data.size() + c.offsets.size();
  return n;
}

Status NativeBlock::check() const {
  if (!bad_type_.empty()) return Status::Invalid(bad_type_);
  if (!mistake_.empty()) return Status::Invalid(mistake_);
  for (const Column& c : columns_) {
    const uint64_t per_row = c.type.array ? c.offsets.size() / sizeof(uint64_t) : c.elements;
    if (per_row != rows_) {
      return Status::Invalid(fmt::format("column {} holds {} {} for {} rows", c.name, per_row,
                                         c.type.array ? "arrays" : "values", rows_));
    }
  }
  return Status::Ok();
}

Status NativeBlock::pieces(std::string* headers, std::vector<std::string_view>* out) const {
  if (Status s = check(); !s.ok()) return s;
  // Every header first, so that the views into *headers do not move as it grows.
  headers->clear();
  std::vector<size_t> ends;
  put_varint(headers, columns_.size());
  put_varint(headers, rows_);
  ends.push_back(headers->size());
  for (const Column& c : columns_) {
    put_varint(headers, c.name.size());
    headers->append(c.name);
    put_varint(headers, c.type_name.size());
    headers->append(c.type_name);
    ends.push_back(headers->size());
  }
  const std::string_view h = *headers;
  out->push_back(h.substr(0, ends[0]));
  for (size_t i = 0; i < columns_.size(); ++i) {
    out->push_back(h.substr(ends[i], ends[i + 1] - ends[i]));
    if (columns_[i].offsets.size() > 0) out->push_back(columns_[i].offsets.view());
    if (columns_[i].data.size() > 0) out->push_back(columns_[i].data.view());
  }
  return Status::Ok();
}

Status NativeBlock::write(std::string* out) const {
  std::string headers;
  std::vector<std::string_view> views;
  if (Status s = pieces(&headers, &views); !s.ok()) return s;
  for (std::string_view v : views) out->append(v);
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
