// Internal helpers shared by the exporters: a buffered output file written with large
// write(2) calls (no iostreams), and JSON/CSV text encoding of field values into a
// fmt::memory_buffer without per-value allocation.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::exporter {

// A file (or standard output for "-") written through a memory buffer. Errors are sticky:
// after one, further appends are dropped and close() reports it.
class OutFile {
 public:
  static constexpr size_t kFlushBytes = 1 << 20;

  OutFile() = default;
  ~OutFile();
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;

  // Creates path (create_output_file: mode 0600, a new file); "-" is standard output.
  Status open(const std::string& path);
  // The buffer to format into; call maybe_flush() after appending.
  fmt::memory_buffer& buf() { return buf_; }
  void maybe_flush() {
    if (buf_.size() >= kFlushBytes) flush();
  }
  void append(const void* data, size_t n);
  void flush();
  Status close();
  uint64_t bytes() const { return bytes_ + buf_.size(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool own_fd_ = false;
  int error_ = 0;
  uint64_t bytes_ = 0;
  fmt::memory_buffer buf_;
};

// Writes all of data to fd (retrying short writes). Returns 0 or an errno value.
int write_all(int fd, const void* data, size_t n);
// Creates path (create_output_file: mode 0600, never the trace read, `source_fd`) holding
// text; "cannot write PATH: ..." on failure.
Status write_text_file(const std::string& path, const std::string& text, int source_fd);

// Appends s as a JSON string literal (quotes, escapes; invalid UTF-8 becomes U+FFFD).
void json_string(fmt::memory_buffer& out, std::string_view s);
// Appends a field value as JSON: integers as numbers, pointers as "0x..." strings, doubles
// as numbers (non-finite ones as strings), bools, strings.
void json_value(fmt::memory_buffer& out, const FieldValue& v);
// Appends a field value as a CSV cell (quoted when needed).
void csv_value(fmt::memory_buffer& out, const FieldValue& v);
// Appends ns as microseconds with three decimals ("12.345").
inline void micros(fmt::memory_buffer& out, uint64_t ns) {
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}
inline void append(fmt::memory_buffer& out, std::string_view s) {
  out.append(s.data(), s.data() + s.size());
}

}  // namespace nanotrace::exporter
