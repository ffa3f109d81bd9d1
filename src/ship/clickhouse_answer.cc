// ClickHouse's answers read: error texts and their codes' classes, numbers, TabSeparated rows.
#include "ship/clickhouse_answer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "base/utf8.hpp"

namespace nanotrace::ship {
namespace {

constexpr size_t kMessageBytes = 400;

struct KnownCode {
  int code;
  const char* name;
  CodeClass kind;
};

constexpr CodeClass T = CodeClass::kTransient;
constexpr CodeClass R = CodeClass::kRefused;

// ClickHouse's ErrorCodes.cpp, the ones a shipper meets. Transient: the server or its
// cluster is short of something for now, or the request was cut short. Refused: the request,
// the schema or the credentials are wrong, and stay wrong.
constexpr KnownCode kCodes[] = {
    {3, "UNEXPECTED_END_OF_FILE", T},
    {8, "THERE_IS_NO_COLUMN", R},
    {10, "NOT_FOUND_COLUMN_IN_BLOCK", R},
    {16, "NO_SUCH_COLUMN_IN_TABLE", R},
    {20, "NUMBER_OF_COLUMNS_DOESNT_MATCH", R},
    {27, "CANNOT_PARSE_INPUT_ASSERTION_FAILED", R},
    {32, "ATTEMPT_TO_READ_AFTER_EOF", T},
    {33, "CANNOT_READ_ALL_DATA", T},
    {36, "BAD_ARGUMENTS", R},
    {44, "ILLEGAL_COLUMN", R},
    {47, "UNKNOWN_IDENTIFIER", R},
    {48, "NOT_IMPLEMENTED", R},
    {50, "UNKNOWN_TYPE", R},
    {53, "TYPE_MISMATCH", R},
    {57, "TABLE_ALREADY_EXISTS", R},
    {60, "UNKNOWN_TABLE", R},
    {62, "SYNTAX_ERROR", R},
    {70, "CANNOT_CONVERT_TYPE", R},
    {73, "UNKNOWN_FORMAT", R},
    {74, "CANNOT_READ_FROM_FILE_DESCRIPTOR", T},
    {75, "CANNOT_WRITE_TO_FILE_DESCRIPTOR", T},
    {81, "UNKNOWN_DATABASE", R},
    {115, "UNKNOWN_SETTING", R},
    {117, "INCORRECT_DATA", R},
    {159, "TIMEOUT_EXCEEDED", T},
    {160, "TOO_SLOW", T},
    {164, "READONLY", R},
    {170, "BAD_GET", R},
    {173, "CANNOT_ALLOCATE_MEMORY", T},
    {192, "UNKNOWN_USER", R},
    {193, "WRONG_PASSWORD", R},
    {194, "REQUIRED_PASSWORD", R},
    {195, "IP_ADDRESS_NOT_ALLOWED", R},
    {201, "QUOTA_EXCEEDED", T},
    {202, "TOO_MANY_SIMULTANEOUS_QUERIES", T},
    {203, "NO_FREE_CONNECTION", T},
    {209, "SOCKET_TIMEOUT", T},
    {210, "NETWORK_ERROR", T},
    {225, "NO_ZOOKEEPER", T},
    {236, "ABORTED", T},
    {241, "MEMORY_LIMIT_EXCEEDED", T},
    {242, "TABLE_IS_READ_ONLY", T},
    {243, "NOT_ENOUGH_SPACE", T},
    {244, "UNEXPECTED_ZOOKEEPER_ERROR", T},
    {252, "TOO_MANY_PARTS", T},
    {271, "CANNOT_DECOMPRESS", R},
    {279, "ALL_CONNECTION_TRIES_FAILED", T},
    {285, "TOO_FEW_LIVE_REPLICAS", T},
    {286, "UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE", T},
    {291, "DATABASE_ACCESS_DENIED", R},
    {297, "NO_ELEMENTS_IN_CONFIG", R},
    {319, "UNKNOWN_STATUS_OF_INSERT", T},
    {341, "UNFINISHED", T},
    {349, "CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN", R},
    {394, "QUERY_WAS_CANCELLED", T},
    {425, "SYSTEM_ERROR", T},
    {439, "CANNOT_SCHEDULE_TASK", T},
    {473, "DEADLOCK_AVOIDED", T},
    {497, "ACCESS_DENIED", R},
    {516, "AUTHENTICATION_FAILED", R},
    {999, "KEEPER_EXCEPTION", T},
    {1000, "POCO_EXCEPTION", T},
};

const KnownCode* find_code(int code) {
  for (const KnownCode& k : kCodes) {
    if (k.code == code) return &k;
  }
  return nullptr;
}

// The decimal number at the start of s (1 to 6 digits, as error codes are), or -1.
int leading_code(std::string_view s) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || digits > 6) return -1;
  int code = 0;
  std::from_chars(s.data(), s.data() + digits, code);
  return code;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// An error name as newer servers put it, "(UNKNOWN_TABLE)": capitals, digits and underscores.
bool is_error_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The exception's own text out of the answer's first line: after "DB::Exception: ", without
// 18.16's ", e.what() = ..." and newer servers' " (NAME) (version ...)" (whose NAME goes to
// *name).
std::string_view exception_text(std::string_view line, std::string* name) {
  std::string_view text = line;
  if (size_t at = text.find("DB::Exception: "); at != std::string_view::npos) {
    text.remove_prefix(at + 15);
  }
  if (size_t at = text.rfind(", e.what() = "); at != std::string_view::npos) {
    text = text.substr(0, at);
  }
  if (size_t at = text.rfind(" (version "); at != std::string_view::npos) {
    text = text.substr(0, at);
  }
  if (!text.empty() && text.back() == ')') {
    const size_t open = text.rfind(" (");
    if (open != std::string_view::npos) {
      const std::string_view inside = text.substr(open + 2, text.size() - open - 3);
      if (is_error_name(inside)) {
        *name = std::string(inside);
        text = text.substr(0, open);
      }
    }
  }
  return text;
}

}  // namespace

CodeClass classify_code(int code) {
  const KnownCode* k = find_code(code);
  return k ? k->kind : CodeClass::kUnknown;
}

std::string_view code_name(int code) {
  const KnownCode* k = find_code(code);
  return k ? k->name : "";
}

std::string printable(std::string_view text, size_t max_bytes) {
  std::string valid = utf8::valid(text);
  std::string out;
  out.reserve(std::min(valid.size(), max_bytes) + 3);
  const auto* p = reinterpret_cast<const unsigned char*>(valid.data());
  for (size_t i = 0; i < valid.size();) {
    const uint32_t n = utf8::decode(p + i, valid.size() - i).length;
    if (out.size() + n > max_bytes) {
      out += "...";
      break;
    }
    if (n == 1 && (p[i] < 0x20 || p[i] == 0x7f)) {
      out.push_back(' ');
    } else {
      out.append(valid, i, n);
    }
    i += n;
  }
  return out;
}

ServerError parse_error_answer(long http_status, std::string_view body,
                               std::string_view header_code) {
  ServerError e;
  e.http_status = http_status;
  std::string_view line = body.substr(0, body.find('\n'));
  // 18.16 starts the text with "Code: N, ", newer servers with "Code: N. ".
  if (starts_with(line, "Code: ")) e.code = leading_code(line.substr(6));
  if (e.code < 0 && !header_code.empty()) e.code = leading_code(header_code);
  std::string name;
  const std::string_view text = e.code >= 0 ? exception_text(line, &name) : line;
  e.message = printable(text, kMessageBytes);
  if (e.message.empty()) e.message = fmt::format("HTTP status {} without a message", http_status);
  const CodeClass kind = e.code >= 0 ? classify_code(e.code) : CodeClass::kUnknown;
  e.name = !name.empty() ? name : std::string(code_name(e.code));
  switch (kind) {
    case CodeClass::kTransient:
      e.transient = true;
      break;
    case CodeClass::kRefused:
      e.transient = false;
      break;
    case CodeClass::kUnknown:
      e.transient = !(http_status >= 400 && http_status < 500);
      break;
  }
  return e;
}

Result<uint64_t> parse_count(std::string_view body) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), n);
  const std::string_view rest(end, body.data() + body.size() - end);
  if (ec != std::errc() || !(rest.empty() || rest == "\n")) {
    return Status::IoError(
        fmt::format("expected a number, got '{}'", printable(body.substr(0, 200), 200)));
  }
  return n;
}

Result<std::vector<std::vector<std::string>>> parse_tab_separated(std::string_view body,
                                                                  size_t columns) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string value;
  auto bad = [&](const char* why) {
    return Status::IoError(fmt::format("a TabSeparated answer {} (row {}): '{}'", why,
                                       rows.size() + 1, printable(body.substr(0, 200), 200)));
  };
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '\t' || c == '\n') {
      row.push_back(std::move(value));
      value.clear();
      if (c == '\n') {
        if (row.size() != columns) return bad("has a row of another width");
        rows.push_back(std::move(row));
        row.clear();
      }
      continue;
    }
    if (c != '\\') {
      value.push_back(c);
      continue;
    }
    if (++i >= body.size()) return bad("ends inside an escape");
    switch (body[i]) {
      case 't':
        value.push_back('\t');
        break;
      case 'n':
        value.push_back('\n');
        break;
      case 'r':
        value.push_back('\r');
        break;
      case 'b':
        value.push_back('\b');
        break;
      case 'f':
        value.push_back('\f');
        break;
      case 'a':
        value.push_back('\a');
        break;
      case 'v':
        value.push_back('\v');
        break;
      case '0':
        value.push_back('\0');
        break;
      case 'x': {
        uint8_t byte = 0;
        if (i + 2 >= body.size() ||
            std::from_chars(body.data() + i + 1, body.data() + i + 3, byte, 16).ptr !=
                body.data() + i + 3) {
          return bad("has a bad \\x escape");
        }
        value.push_back(static_cast<char>(byte));
        i += 2;
        break;
      }
      default:
        value.push_back(body[i]);
        break;  // \\ \' and any other: the character
    }
  }
  if (!row.empty() || !value.empty()) return bad("ends without a line feed");
  return rows;
}

}  // namespace nanotrace::ship
