// A block of rows in ClickHouse's Native format, built column by column as rows arrive: the
// bulk input format ClickHouse parses fastest (no text to scan, values as they lie in memory).
// The layout, as ClickHouse's HTTP interface reads it (no block-info header: that belongs to
// its TCP protocol): the number of columns and of rows as LEB128 varints, then per column its
// name, its type name and its values. Fixed-size values are little-endian, one after another;
// a String is a varint length and its bytes; an Array(T) is one UInt64 per row (the running
// count of elements) followed by all the elements as a column of T.
//
// Typed: each column knows its type (the schema's type name, parsed), and a value of another
// type is refused, as is a block whose columns do not all hold one value (or one array) per
// row: write() then returns the first such mistake instead of bytes that the server would
// misread or refuse. ClickHouseTables (schema_check.hpp) checks the same types against the
// server's tables.
//
// Text from a trace is untrusted: put_text() stores it as valid UTF-8 (base/utf8.hpp).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::ship {

// The value types of the shipped schema (those ClickHouse 18.16 and later share).
enum class ValueType : uint8_t {
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kInt64,
  kFloat64,
  kDate,
  kString
};

struct ColumnType {
  ValueType value = ValueType::kUInt8;
  bool array = false;  // Array(value)
  bool operator==(const ColumnType&) const = default;
};

// "UInt64", "Date", "Array(String)", ...: the type, or nothing for a type outside the list
// above (Nullable, LowCardinality, nested arrays, ...).
std::optional<ColumnType> parse_column_type(std::string_view name);
// The type's name as ClickHouse writes it.
std::string column_type_name(ColumnType type);

// Bytes appended at the end: like std::string, but growing without zeroing what it grows
// into, by realloc (which moves a large buffer's pages instead of copying them).
class ByteBuffer {
 public:
  ByteBuffer() = default;
  ~ByteBuffer() { std::free(data_); }
  ByteBuffer(ByteBuffer&& o) noexcept : data_(o.data_), size_(o.size_), capacity_(o.capacity_) {
    o.data_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }
  ByteBuffer& operator=(ByteBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
    return *this;
  }
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  void append(const void* p, size_t n) {
    if (size_ + n > capacity_) grow(size_ + n);
    std::memcpy(data_ + size_, p, n);
    size_ += n;
  }
  template <class T>
  void append_value(T v) {
    if (size_ + sizeof(T) > capacity_) grow(size_ + sizeof(T));
    std::memcpy(data_ + size_, &v, sizeof(T));
    size_ += sizeof(T);
  }
  // An unsigned LEB128 varint (ClickHouse's VarUInt).
  void append_varint(uint64_t v) {
    if (size_ + 10 > capacity_) grow(size_ + 10);
    while (v >= 0x80) {
      data_[size_++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    data_[size_++] = static_cast<char>(v);
  }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {data_, size_}; }
  void clear() { size_ = 0; }  // the memory stays

 private:
  void grow(size_t need);
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

class NativeBlock {
 public:
  // Declares the next column (in table order); returns its index. An unknown type name makes
  // the block unwritable (write() says which).
  size_t add_column(std::string name, std::string_view type);

  // A fixed-size value of the column's type: uint8_t (UInt8), uint16_t (UInt16), uint32_t,
  // uint64_t, int64_t (Int64), double (Float64). For an Array column, one element.
  template <class T>
  void put(size_t column, T value) {
    static_assert(std::is_arithmetic_v<T>, "a fixed-size value");
    Column& c = columns_[column];
    if (c.type.value != value_type<T>()) [[unlikely]] {
      return mistyped(column, value_type<T>());
    }
    append(c, value);
  }
  // A Date: days since 1970-01-01.
  void put_date(size_t column, uint16_t day) {
    Column& c = columns_[column];
    if (c.type.value != ValueType::kDate) [[unlikely]] {
      return mistyped(column, ValueType::kDate);
    }
    append(c, day);
  }
  // A String value, as it is (REQUIRES: valid UTF-8, e.g. from text() or a literal).
  void put_string(size_t column, std::string_view s);
  // A String value from untrusted bytes: ill-formed sequences become U+FFFD.
  void put_text(size_t column, std::string_view s);
  // Array(T) columns: the elements of the current row go with put*(); end_array() closes it.
  void end_array(size_t column);

  // A row is complete: every column got its value.
  void end_row() { ++rows_; }
  size_t rows() const { return rows_; }
  size_t columns() const { return columns_.size(); }
  const std::string& column_name(size_t column) const { return columns_[column].name; }
  ColumnType column_type(size_t column) const { return columns_[column].type; }
  // Bytes the values hold so far (what write() will produce, near enough).
  size_t bytes() const;

  // Appends the block in Native format to out. Errors: kInvalidArgument for a value of the
  // wrong type, a column without one value per row or an unknown type (nothing appended).
  Status write(std::string* out) const;
  // The same bytes without a copy: pieces that, one after another, are the block (they point
  // into the block and into *headers, valid until either changes). Errors: as write().
  Status pieces(std::string* headers, std::vector<std::string_view>* out) const;
  // Empties every column (declarations kept, memory kept) and forgets a mistake.
  void clear();

 private:
  struct Column {
    std::string name;
    std::string type_name;
    ColumnType type;
    ByteBuffer data;        // the values, or an array's elements
    ByteBuffer offsets;     // Array(T): one UInt64 per row
    uint64_t elements = 0;  // values put (an array's running count)
  };

  template <class T>
  static constexpr ValueType value_type() {
    if constexpr (std::is_same_v<T, uint8_t>) return ValueType::kUInt8;
    if constexpr (std::is_same_v<T, uint16_t>) return ValueType::kUInt16;
    if constexpr (std::is_same_v<T, uint32_t>) return ValueType::kUInt32;
    if constexpr (std::is_same_v<T, uint64_t>) return ValueType::kUInt64;
    if constexpr (std::is_same_v<T, int64_t>) return ValueType::kInt64;
    if constexpr (std::is_same_v<T, double>) return ValueType::kFloat64;
    static_assert(std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t> ||
                      std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t> ||
                      std::is_same_v<T, int64_t> || std::is_same_v<T, double>,
                  "not a type of the schema");
    return ValueType::kUInt8;
  }
  template <class T>
  static void append(Column& c, T value) {
    ++c.elements;
    c.data.append_value(value);
  }
  void mistyped(size_t column, ValueType given);
  Status check() const;

  std::vector<Column> columns_;
  size_t rows_ = 0;
  std::string scratch_;
  std::string mistake_;   // the first wrong put since clear()
  std::string bad_type_;  // a column declared with a type outside the list
};

// Appends v as an unsigned LEB128 varint (ClickHouse's VarUInt).
void put_varint(std::string* out, uint64_t v);

}  // namespace nanotrace::ship
