// Slow paths of json_text.hpp, out of line so the per-record code stays small.
#include "export/json_text.hpp"

#include <fmt/compile.h>

#include "export/output.hpp"

namespace nanotrace::exporter::json {
namespace {

char* put_text(char* p, std::string_view text) {
  std::memcpy(p, text.data(), text.size());
  return p + text.size();
}

}  // namespace

char* put_double_slow(char* p, double d) {
  // Non-finite values as protobuf's JSON mapping spells them.
  if (std::isnan(d)) return put_text(p, "\"NaN\"");
  if (std::isinf(d)) return put_text(p, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  char* end = fmt::format_to(p, FMT_COMPILE("{}"), d);
  // A float stays a float to a JSON reader: "2" would read back as an integer.
  for (char* q = p; q < end; ++q) {
    if (*q == '.' || *q == 'e' || *q == 'E') return end;
  }
  return put_text(end, ".0");
}

char* put_string_slow(char* p, std::string_view s) {
  fmt::memory_buffer escaped;
  json_string(escaped, s);
  std::memcpy(p, escaped.data(), escaped.size());
  return p + escaped.size();
}

}  // namespace nanotrace::exporter::json
