// libFuzzer target for the parsers of ClickHouse's answers (src/ship/clickhouse_answer.hpp):
// the first byte picks the HTTP status and the TabSeparated width, the rest up to the first
// NUL is the X-ClickHouse-Exception-Code header and what follows the body. Every parser gets
// every input; their results are checked for the promises the header makes (a message of at
// most 403 bytes without a line break or control character, rows of the asked width). Any
// crash, out-of-bounds access (ASan), undefined behaviour (UBSan) or broken promise fails.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/utf8.hpp"
#include "ship/clickhouse_answer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const long kStatuses[] = {200, 400, 401, 403, 404, 500, 502, 503};
  const long status = kStatuses[data[0] & 7];
  const size_t columns = 1 + ((data[0] >> 3) & 3);
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view header =
      nul == std::string_view::npos ? std::string_view() : rest.substr(0, nul);
  const std::string_view body = nul == std::string_view::npos ? rest : rest.substr(nul + 1);

  for (std::string_view b : {body, rest}) {
    nanotrace::ship::ServerError e = nanotrace::ship::parse_error_answer(status, b, header);
    if (e.message.empty() || e.message.size() > 403 || !nanotrace::utf8::is_valid(e.message)) {
      std::abort();
    }
    for (unsigned char c : e.message) {
      if (c < 0x20 || c == 0x7f) std::abort();
    }
    if (e.code < -1) std::abort();
    (void)nanotrace::ship::classify_code(e.code);
  }
  auto n = nanotrace::ship::parse_count(body);
  if (!n.ok() && n.status().message().empty()) std::abort();
  auto rows = nanotrace::ship::parse_tab_separated(body, columns);
  if (rows.ok()) {
    for (const auto& row : *rows) {
      if (row.size() != columns) std::abort();
    }
  }
  const std::string p = nanotrace::ship::printable(body, 64);
  if (p.size() > 67 || !nanotrace::utf8::is_valid(p)) std::abort();
  return 0;
}
