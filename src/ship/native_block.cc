// NativeBlock: rows into ClickHouse Native columns.
#include "ship/native_block.hpp"

#include "base/utf8.hpp"

namespace nanotrace::ship {

void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t NativeBlock::add_column(std::string name, std::string type) {
  Column c;
  c.array = type.rfind("Array(", 0) == 0;
  c.name = std::move(name);
  c.type = std::move(type);
  columns_.push_back(std::move(c));
  return columns_.size() - 1;
}

void NativeBlock::put_string(size_t column, std::string_view s) {
  Column& c = columns_[column];
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
  const size_t at = c.offsets.size();
  c.offsets.resize(at + sizeof(uint64_t));
  std::memcpy(c.offsets.data() + at, &c.elements, sizeof(uint64_t));
}

size_t NativeBlock::bytes() const {
  size_t n = 0;
  for (const Column& c : columns_) n += c.data.size() + c.offsets.size();
  return n;
}

void NativeBlock::write(std::string* out) const {
  put_varint(out, columns_.size());
  put_varint(out, rows_);
  for (const Column& c : columns_) {
    put_varint(out, c.name.size());
    out->append(c.name);
    put_varint(out, c.type.size());
    out->append(c.type);
    out->append(c.offsets);
    out->append(c.data);
  }
}

void NativeBlock::clear() {
  for (Column& c : columns_) {
    c.data.clear();
    c.offsets.clear();
    c.elements = 0;
  }
  rows_ = 0;
}

}  // namespace nanotrace::ship
