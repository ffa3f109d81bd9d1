// A client of one ClickHouse server's HTTP interface, on libcurl: statements, queries whose
// answer is text, and inserts of Native blocks sent compressed.
//
// Compression: ClickHouse's own compressed-block framing (`decompress=1`), which every
// release since long before 18.16 reads: per block a 16-byte checksum, a method byte, the
// compressed and uncompressed sizes, then the data. We compress each block with zstd
// (method 0x90; zstd is already our dependency, and 18.16's HTTP interface takes no
// Content-Encoding but gzip and deflate, which cost several times more CPU per byte). The
// 16-byte checksum is CityHash128 v1.0.2, which no Debian library provides: the insert asks
// the server not to check it (http_native_compression_disable_checksumming_on_decompress)
// and each zstd frame carries its own XXH64 content checksum, which the server's zstd does
// check: a damaged block is refused either way.
//
// Errors, each a one-line message naming the server, in two kinds (clickhouse_answer.hpp):
//   - kIoError: transient, the same request may succeed later: a refused, dropped or timed-out
//     connection (curl's reason), or a server error of a transient kind ("ClickHouse at URL:
//     code 241 MEMORY_LIMIT_EXCEEDED: ...").
//   - kInvalidArgument: refused, no retry can help: the server's answer says the request, the
//     schema or the credentials are wrong ("ClickHouse at URL refused: code 60 UNKNOWN_TABLE:
//     Table ... doesn't exist"), or the URL or TLS set-up is.
// A connection that sends nothing for 60 s is dropped. A request in flight ends (kIoError,
// "cancelled") within about a second of *cancel becoming true, whatever the server does
// (libcurl's progress callback sees it).
//
// Thread safety: a client belongs to one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::ship {

struct ServerError;

class ClickHouseHttp {
 public:
  // url: "http://host:port" (user and password may be in it: http://user:pass@host:port).
  // cancel (optional, outliving the client): ends requests in flight once true.
  // Errors: kInvalidArgument for a URL with a query string or another scheme.
  static Result<std::unique_ptr<ClickHouseHttp>> open(const std::string& url,
                                                      const std::atomic<bool>* cancel = nullptr);
  ~ClickHouseHttp();
  ClickHouseHttp(const ClickHouseHttp&) = delete;
  ClickHouseHttp& operator=(const ClickHouseHttp&) = delete;

  // Runs a statement or query; returns the answer's body (for a query, its rows in the
  // format it names).
  Result<std::string> query(std::string_view sql);
  // One number from a query that returns one (SELECT count() ...).
  Result<uint64_t> query_count(std::string_view sql);
  // The rows of a query whose answer is TabSeparated (the default), each of `columns` values.
  Result<std::vector<std::vector<std::string>>> query_rows(std::string_view sql, size_t columns);
  // INSERT INTO `table` FORMAT Native with body: Native blocks (NativeBlock::write), or the
  // pieces that are them one after another (NativeBlock::pieces), sent without a copy.
  // compress: send them as zstd-compressed ClickHouse blocks.
  Status insert_native(std::string_view table, std::string_view native, bool compress);
  Status insert_native(std::string_view table, const std::vector<std::string_view>& native,
                       bool compress);

  // The server's URL without user and password (what messages show).
  const std::string& url() const { return shown_url_; }
  // True if the URL names this machine (localhost, 127.0.0.0/8, [::1]).
  bool loopback() const { return loopback_; }

 private:
  ClickHouseHttp() = default;
  Result<std::string> post(const std::string& params, const std::vector<std::string_view>& body);
  Status server_error(const ServerError& e) const;

  std::string url_;
  std::string shown_url_;
  bool loopback_ = false;
  void* curl_ = nullptr;  // CURL*
  const std::atomic<bool>* cancel_ = nullptr;
  std::string compressed_;
};

// Appends data as ClickHouse compressed blocks of zstd frames (at most 1 MiB of data each).
void compress_blocks(std::string_view data, std::string* out);

}  // namespace nanotrace::ship
