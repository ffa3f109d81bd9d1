// A block of rows in ClickHouse's Native format, built column by column as rows arrive: the
// bulk input format ClickHouse parses fastest (no text to scan, values as they lie in memory).
// The layout, as ClickHouse's HTTP interface reads it (no block-info header: that belongs to
// its TCP protocol): the number of columns and of rows as LEB128 varints, then per column its
// name, its type name and its values. Fixed-size values are little-endian, one after another;
// a String is a varint length and its bytes; an Array(T) is one UInt64 per row (the running
// count of elements) followed by all the elements as a column of T.
//
// Text from a trace is untrusted: put_text() stores it as valid UTF-8 (base/utf8.hpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace nanotrace::ship {

class NativeBlock {
 public:
  // Declares the next column (in table order); returns its index.
  size_t add_column(std::string name, std::string type);

  // A fixed-size value (UInt8..UInt64, Int64, Float64, Date as uint16_t): its bytes.
  template <class T>
  void put(size_t column, T value) {
    Column& c = columns_[column];
    ++c.elements;
    std::string& d = c.data;
    const size_t at = d.size();
    d.resize(at + sizeof(T));
    std::memcpy(d.data() + at, &value, sizeof(T));
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
  // Bytes the values hold so far (what write() will produce, near enough).
  size_t bytes() const;

  // Appends the block in Native format to out.
  void write(std::string* out) const;
  // Empties every column (declarations kept, memory kept).
  void clear();

 private:
  struct Column {
    std::string name;
    std::string type;
    std::string data;       // the values, or an array's elements
    std::string offsets;    // Array(T): one UInt64 per row
    uint64_t elements = 0;  // values put (an array's running count)
    bool array = false;
  };
  std::vector<Column> columns_;
  size_t rows_ = 0;
  std::string scratch_;
};

// Appends v as an unsigned LEB128 varint (ClickHouse's VarUInt).
void put_varint(std::string* out, uint64_t v);

}  // namespace nanotrace::ship
