// Slow paths of json_text.hpp, out of line so the per-record code stays small.
#include "export/json_text.hpp"

#include <fmt/compile.h>

#include "export/output.hpp"

namespace nanotrace::exporter::json {

char* put_double_slow(char* p, double d) {
  if (std::isfinite(d)) return fmt::format_to(p, FMT_COMPILE("{}"), d);
  return fmt::format_to(p, FMT_COMPILE("\"{}\""), d);
}

char* put_string_slow(char* p, std::string_view s) {
  fmt::memory_buffer escaped;
  json_string(escaped, s);
  std::memcpy(p, escaped.data(), escaped.size());
  return p + escaped.size();
}

}  // namespace nanotrace::exporter::json
