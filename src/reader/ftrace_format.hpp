// The text of an ftrace event format (tracefs events/<system>/<event>/format) and of
// events/header_page, as a trace file's KERNEL_META stores them: parsed for what decoding a
// raw event needs (name, id, each field's declaration, offset, size and sign) and nothing
// else: the print fmt line is not read. Internal header.
//
// The text is untrusted (a damaged or forged file), so the parser is line by line, bounded,
// and strict: anything that is not the kernel's layout is an error, never a guess. (The
// reader used libtraceevent for this until fuzzing found it reading through a null pointer in
// its print fmt parser on a mutated format within a few thousand inputs: it parses the local
// kernel's text, which it trusts.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::reader {

struct FtraceField {
  std::string type;  // the declaration without the name, e.g. "const char *", "__data_loc char[]"
  std::string name;
  uint32_t offset = 0;
  uint32_t size = 0;
  bool is_signed = false;
  bool is_array = false;     // "name[N]", or "[]" in the type
  bool is_pointer = false;   // the type ends with '*'
  bool is_dynamic = false;   // __data_loc or __rel_loc: a 32-bit (length << 16 | offset) word
  bool is_relative = false;  // __rel_loc: the offset counts from the end of the field
  // A char array or dynamic char[]: text, shown up to its first NUL.
  bool is_text() const;
};

struct FtraceFormat {
  std::string name;
  uint32_t id = 0;                         // the event's common_type, at most 65535
  std::vector<FtraceField> common_fields;  // before the format's first blank line
  std::vector<FtraceField> fields;         // the event's own
};

// Limits beyond which a format is refused as corrupt (the kernel's largest are far below).
inline constexpr size_t kMaxFtraceFormatBytes = 64 * 1024;
inline constexpr size_t kMaxFtraceFields = 256;

// Errors: kCorrupt, naming what is wrong.
Result<FtraceFormat> parse_ftrace_format(std::string_view text);

// The size of the sub-buffer header's `commit` field, from header_page's text. Errors:
// kCorrupt.
Result<uint32_t> parse_header_page_commit_size(std::string_view text);

}  // namespace nanotrace::reader
