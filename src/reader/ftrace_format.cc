// A bounded, line-by-line parser of ftrace's format text (see ftrace_format.hpp).
#include "reader/ftrace_format.hpp"

#include <charconv>

namespace nanotrace::reader {
namespace {

constexpr size_t kMaxDeclaration = 256;
constexpr uint32_t kMaxOffsetOrSize = 0x7fffffff;

// The next line of *rest ('\n' excluded), consumed.
std::string_view take_line(std::string_view* rest) {
  const size_t end = rest->find('\n');
  const std::string_view line = rest->substr(0, end);
  rest->remove_prefix(end == std::string_view::npos ? rest->size() : end + 1);
  return line;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// A decimal number of at most max, and nothing else.
bool parse_number(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out <= max;
}

// "key: value" with the key as given; the value trimmed, or false.
bool value_of(std::string_view line, std::string_view key, std::string_view* value) {
  line = trim(line);
  if (line.substr(0, key.size()) != key || line.size() == key.size() || line[key.size()] != ':') {
    return false;
  }
  *value = trim(line.substr(key.size() + 1));
  return true;
}

// Where the "[...]" that ends decl opens (brackets may nest: "[sizeof(x[2])]"), or npos.
size_t array_suffix_start(std::string_view decl) {
  int depth = 0;
  for (size_t i = decl.size(); i-- > 0;) {
    if (decl[i] == ']') ++depth;
    if (decl[i] == '[' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// "TYPE NAME" or "TYPE NAME[N]" into f's type, name and kind.
Status parse_declaration(std::string_view decl, FtraceField* f) {
  if (decl.empty() || decl.size() > kMaxDeclaration || !printable(decl)) {
    return Status::Corrupt("a field declaration is empty, too long or not text");
  }
  if (decl.back() == ']') {
    const size_t open = array_suffix_start(decl);
    if (open == std::string_view::npos) return Status::Corrupt("unbalanced [] in a field");
    f->is_array = true;
    decl = trim(decl.substr(0, open));
  }
  size_t name_at = decl.size();
  while (name_at > 0 && identifier_char(decl[name_at - 1])) --name_at;
  const std::string_view name = decl.substr(name_at);
  const std::string_view type = trim(decl.substr(0, name_at));
  if (name.empty() || (name[0] >= '0' && name[0] <= '9') || type.empty()) {
    return Status::Corrupt("a field declaration without a type and a name");
  }
  f->name = name;
  f->type = type;
  f->is_array = f->is_array || f->type.find("[]") != std::string::npos;
  f->is_pointer = f->type.back() == '*';
  f->is_relative = f->type.starts_with("__rel_loc");
  f->is_dynamic = f->is_relative || f->type.starts_with("__data_loc");
  return Status::Ok();
}

// "\tfield:DECL;\toffset:N;\tsize:N;\tsigned:N;" (signed is absent on old kernels; attributes
// the kernel may add later are skipped).
Status parse_field_line(std::string_view line, FtraceField* f) {
  std::string_view decl;
  if (!value_of(line, "field", &decl)) return Status::Corrupt("a line that is not a field");
  const size_t semicolon = decl.find(';');
  if (semicolon == std::string_view::npos) return Status::Corrupt("a field without ';'");
  std::string_view attributes = decl.substr(semicolon + 1);
  if (Status s = parse_declaration(trim(decl.substr(0, semicolon)), f); !s.ok()) return s;
  bool has_offset = false, has_size = false;
  while (!trim(attributes).empty()) {
    const size_t end = attributes.find(';');
    if (end == std::string_view::npos) return Status::Corrupt("a field attribute without ';'");
    const std::string_view attribute = attributes.substr(0, end);
    attributes.remove_prefix(end + 1);
    std::string_view v;
    uint64_t n = 0;
    if (value_of(attribute, "offset", &v)) {
      if (!parse_number(v, kMaxOffsetOrSize, &n)) return Status::Corrupt("a bad field offset");
      f->offset = static_cast<uint32_t>(n);
      has_offset = true;
    } else if (value_of(attribute, "size", &v)) {
      if (!parse_number(v, kMaxOffsetOrSize, &n)) return Status::Corrupt("a bad field size");
      f->size = static_cast<uint32_t>(n);
      has_size = true;
    } else if (value_of(attribute, "signed", &v)) {
      if (!parse_number(v, 1, &n)) return Status::Corrupt("a bad field sign");
      f->is_signed = n == 1;
    }
  }
  if (!has_offset || !has_size) return Status::Corrupt("a field without offset or size");
  return Status::Ok();
}

Status corrupt_format(const std::string& what) { return Status::Corrupt("ftrace format: " + what); }

}  // namespace

bool FtraceField::is_text() const {
  return (is_array || is_dynamic) && type.find("char") != std::string::npos;
}

Result<FtraceFormat> parse_ftrace_format(std::string_view text) {
  if (text.size() > kMaxFtraceFormatBytes) return corrupt_format("too long");
  FtraceFormat format;
  std::string_view v;
  uint64_t id = 0;
  if (!value_of(take_line(&text), "name", &v) || v.empty() || v.size() > kMaxDeclaration ||
      !printable(v) || v.find(' ') != std::string_view::npos) {
    return corrupt_format("no event name");
  }
  format.name = v;
  if (!value_of(take_line(&text), "ID", &v) || !parse_number(v, 0xffff, &id)) {
    return corrupt_format("no event ID");
  }
  format.id = static_cast<uint32_t>(id);
  if (!value_of(take_line(&text), "format", &v) || !v.empty()) {
    return corrupt_format("no field list");
  }
  // Common fields, a blank line, the event's fields, a blank line, then the print fmt.
  std::vector<FtraceField>* group = &format.common_fields;
  while (!text.empty()) {
    const std::string_view line = take_line(&text);
    if (trim(line).empty()) {
      if (group == &format.fields) break;
      group = &format.fields;
      continue;
    }
    if (trim(line).starts_with("print fmt:")) break;
    if (format.common_fields.size() + format.fields.size() >= kMaxFtraceFields) {
      return corrupt_format("too many fields");
    }
    FtraceField f;
    if (Status s = parse_field_line(line, &f); !s.ok()) return corrupt_format(s.message());
    group->push_back(std::move(f));
  }
  if (format.common_fields.empty()) return corrupt_format("no common fields");
  return format;
}

Result<uint32_t> parse_header_page_commit_size(std::string_view text) {
  if (text.size() > kMaxFtraceFormatBytes) return corrupt_format("header_page too long");
  for (size_t lines = 0; !text.empty() && lines < kMaxFtraceFields; ++lines) {
    const std::string_view line = take_line(&text);
    if (trim(line).empty()) continue;
    FtraceField f;
    if (Status s = parse_field_line(line, &f); !s.ok()) {
      return corrupt_format("header_page: " + s.message());
    }
    if (f.name == "commit") return f.size;
  }
  return corrupt_format("header_page has no commit field");
}

}  // namespace nanotrace::reader
