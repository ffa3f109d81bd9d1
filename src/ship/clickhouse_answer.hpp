// Reading what a ClickHouse server answers over HTTP: its error answers (which error, and
// whether trying again can help), a number, and rows in TabSeparated format. Every byte of an
// answer is untrusted (a proxy, another server, or a newer ClickHouse may answer anything):
// these parsers never throw, never read past the answer, and keep what they return short and
// printable. tests/fuzz/fuzz_clickhouse_answer.cc fuzzes them.
//
// An error answer is ClickHouse's exception text, whose form changed over the releases:
//   18.16: "Code: 60, e.displayText() = DB::Exception: Table x doesn't exist., e.what() = ..."
//   20-21: "Code: 60, e.displayText() = DB::Exception: Table x doesn't exist (version 21.3)"
//   22- : "Code: 60. DB::Exception: Table x does not exist. (UNKNOWN_TABLE) (version 22.8)"
// and newer servers also send the code in the X-ClickHouse-Exception-Code header.
//
// Transient or refused: an error is *transient* when the same request may succeed later (the
// server is short of memory, disk or time, too many parts or queries, a replica or ZooKeeper
// away, a network error between shards, a request cut short) and *refused* when it cannot
// (syntax, an unknown or differently typed table or column, authentication, permissions, a
// read-only user, an unknown cluster, data the server cannot parse). Codes outside both lists
// go by the HTTP status: 4xx refused, 5xx transient, as is an answer without a code (a proxy's
// 502, 503 or 504).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::ship {

struct ServerError {
  long http_status = 0;
  int code = -1;           // ClickHouse's error code; -1 if the answer names none
  std::string name;        // its name (UNKNOWN_TABLE), from the answer or our table; or ""
  std::string message;     // the exception's text: one line, printable, at most 400 bytes
  bool transient = false;  // trying the same request again may succeed
};

// The error a non-200 answer reports. header_code: the X-ClickHouse-Exception-Code header's
// value, "" if none.
ServerError parse_error_answer(long http_status, std::string_view body,
                               std::string_view header_code = {});

// Whether ClickHouse's error `code` is transient, refused, or unknown to us (by HTTP status).
enum class CodeClass { kTransient, kRefused, kUnknown };
CodeClass classify_code(int code);
// The name of a code we know ("" otherwise).
std::string_view code_name(int code);

// The one unsigned number an answer holds ("123\n"). Errors: kIoError naming what came.
Result<uint64_t> parse_count(std::string_view body);

// Rows of a TabSeparated answer, each with exactly `columns` values, ClickHouse's escapes
// (\t \n \\ \' \0 \b \f \r \a \v \xHH) undone. Errors: kIoError (a row with another number of
// values, an escape cut short, a row without its line feed).
Result<std::vector<std::vector<std::string>>> parse_tab_separated(std::string_view body,
                                                                  size_t columns);

// Text from an answer made fit for a one-line message: valid UTF-8, control characters as
// spaces, at most max_bytes (cut at a character boundary, "..." appended).
std::string printable(std::string_view text, size_t max_bytes);

}  // namespace nanotrace::ship
