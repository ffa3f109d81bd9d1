// Buffered output and text encoding for the exporters (see output.hpp).
#include "export/output.hpp"

#include <fcntl.h>
#include <fmt/compile.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "base/output_file.hpp"
#include "base/utf8.hpp"
#include "export/json_text.hpp"

namespace nanotrace::exporter {

Status write_text_file(const std::string& path, const std::string& text, int source_fd) {
  auto created = create_output_file(path, source_fd);
  if (!created.ok()) return created.status();
  int fd = *created;
  int err = write_all(fd, text.data(), text.size());
  if (::close(fd) != 0 && err == 0) err = errno;
  return err != 0 ? Status::FromErrno("cannot write " + path, err) : Status::Ok();
}

int write_all(int fd, const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

OutFile::~OutFile() {
  if (own_fd_ && fd_ >= 0) ::close(fd_);
}

Status OutFile::open(const std::string& path) {
  path_ = path;
  if (path == "-") {
    fd_ = STDOUT_FILENO;
    own_fd_ = false;
    return Status::Ok();
  }
  auto fd = create_output_file(path);
  if (!fd.ok()) return fd.status();
  fd_ = *fd;
  own_fd_ = true;
  buf_.reserve(kFlushBytes + 4096);
  return Status::Ok();
}

void OutFile::append(const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  buf_.append(p, p + n);
  maybe_flush();
}

void OutFile::flush() {
  if (buf_.size() == 0) return;
  if (error_ == 0 && fd_ >= 0) error_ = write_all(fd_, buf_.data(), buf_.size());
  bytes_ += buf_.size();
  buf_.clear();
}

Status OutFile::close() {
  flush();
  if (own_fd_ && fd_ >= 0) {
    if (::close(fd_) != 0 && error_ == 0) error_ = errno;
    fd_ = -1;
  }
  if (error_ != 0) return Status::FromErrno("cannot write " + path_, error_);
  return Status::Ok();
}

void json_string(fmt::memory_buffer& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      size_t j = i + 1;
      while (j < s.size()) {
        auto d = static_cast<unsigned char>(s[j]);
        if (d < 0x20 || d >= 0x80 || d == '"' || d == '\\') break;
        ++j;
      }
      out.append(s.data() + i, s.data() + j);
      i = j;
      continue;
    }
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      append(out, "\\n");
    } else if (c == '\t') {
      append(out, "\\t");
    } else if (c == '\r') {
      append(out, "\\r");
    } else if (c < 0x20) {
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(esc, esc + 6);
    } else {
      utf8::Sequence seq =
          utf8::decode(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i);
      if (seq.valid) {
        out.append(s.data() + i, s.data() + i + seq.length);
      } else {
        append(out, "\\ufffd");  // the same replacement as utf8::valid(), escaped
      }
      i += seq.length;
      continue;
    }
    ++i;
  }
  out.push_back('"');
}

void json_value(fmt::memory_buffer& out, const FieldValue& v) {
  using abi::FieldType;
  auto it = std::back_inserter(out);
  switch (v.type) {
    case FieldType::kI8:
    case FieldType::kI16:
    case FieldType::kI32:
    case FieldType::kI64: {
      fmt::format_int n(static_cast<int64_t>(v.bits));
      out.append(n.data(), n.data() + n.size());
      return;
    }
    case FieldType::kF32:
    case FieldType::kF64: {
      char text[json::kMaxDouble + json::kSlack];
      out.append(text, json::put_double(text, v.as_double()));
      return;
    }
    case FieldType::kBool:
      append(out, v.bits ? "true" : "false");
      return;
    case FieldType::kString:
      json_string(out, v.text);
      return;
    case FieldType::kPointer:
      fmt::format_to(it, "\"0x{:x}\"", v.bits);
      return;
    default: {
      fmt::format_int n(v.bits);
      out.append(n.data(), n.data() + n.size());
      return;
    }
  }
}

void csv_value(fmt::memory_buffer& out, const FieldValue& v) {
  if (v.type != abi::FieldType::kString) {
    if (v.type == abi::FieldType::kPointer) {
      fmt::format_to(std::back_inserter(out), "0x{:x}", v.bits);
    } else if (v.type == abi::FieldType::kBool) {
      append(out, v.bits ? "true" : "false");
    } else if (v.type == abi::FieldType::kF32 || v.type == abi::FieldType::kF64) {
      fmt::format_to(std::back_inserter(out), "{}", v.as_double());
    } else if (v.type >= abi::FieldType::kI8 && v.type <= abi::FieldType::kI64) {
      fmt::format_to(std::back_inserter(out), "{}", static_cast<int64_t>(v.bits));
    } else {
      fmt::format_to(std::back_inserter(out), "{}", v.bits);
    }
    return;
  }
  std::string repaired;
  std::string_view s = v.text;
  if (!utf8::is_valid(s)) s = repaired = utf8::valid(s);
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
    append(out, s);
    return;
  }
  out.push_back('"');
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
}

}  // namespace nanotrace::exporter
