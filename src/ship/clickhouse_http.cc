// ClickHouseHttp: ClickHouse's HTTP interface through one libcurl easy handle (one kept-alive
// connection), and ClickHouse's compressed-block framing around zstd frames.
#include "ship/clickhouse_http.hpp"

#include <curl/curl.h>
#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>

namespace nanotrace::ship {
namespace {

constexpr size_t kBlockBytes = 1 << 20;  // data per compressed block (ClickHouse's own size)
constexpr uint8_t kMethodZstd = 0x90;
constexpr size_t kHeaderBytes = 16 + 1 + 4 + 4;  // checksum, method, two sizes

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// ClickHouse's message in an error answer: its first line, without the stack trace.
std::string first_line(const std::string& body) {
  std::string s = body.substr(0, body.find('\n'));
  if (s.size() > 600) s.resize(600);
  return s;
}

std::string escape(CURL* curl, std::string_view s) {
  char* e = curl_easy_escape(curl, s.data(), static_cast<int>(s.size()));
  std::string out = e ? e : "";
  curl_free(e);
  return out;
}

// libcurl's progress callback: a non-zero answer aborts the transfer.
int cancelled(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(cancel)->load(std::memory_order_relaxed) ? 1 : 0;
}

}  // namespace

void compress_blocks(std::string_view data, std::string* out) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  for (size_t at = 0; at < data.size(); at += kBlockBytes) {
    const size_t n = std::min(kBlockBytes, data.size() - at);
    const size_t start = out->size();
    out->resize(start + kHeaderBytes + ZSTD_compressBound(n));
    char* header = out->data() + start;
    const size_t z =
        ZSTD_compress2(cctx, header + kHeaderBytes, ZSTD_compressBound(n), data.data() + at, n);
    // z cannot be an error: the destination holds the bound.
    std::memset(header, 0, 16);
    header[16] = static_cast<char>(kMethodZstd);
    const auto compressed = static_cast<uint32_t>(z + 9);  // the sizes count method and sizes
    const auto raw = static_cast<uint32_t>(n);
    std::memcpy(header + 17, &compressed, 4);
    std::memcpy(header + 21, &raw, 4);
    out->resize(start + kHeaderBytes + z);
  }
  ZSTD_freeCCtx(cctx);
}

Result<std::unique_ptr<ClickHouseHttp>> ClickHouseHttp::open(const std::string& url,
                                                             const std::atomic<bool>* cancel) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return Status::Invalid(
        fmt::format("--clickhouse: '{}' is not an http:// or https:// URL", url));
  }
  if (url.find('?') != std::string::npos || url.find('#') != std::string::npos) {
    return Status::Invalid(fmt::format("--clickhouse: '{}' has a query string", url));
  }
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<ClickHouseHttp> c(new ClickHouseHttp());
  c->url_ = url;
  c->cancel_ = cancel;
  const size_t authority = url.find("//") + 2;
  if (c->url_.find('/', authority) == std::string::npos) c->url_ += '/';
  // The URL without its user and password, for messages and reports.
  c->shown_url_ = c->url_;
  const size_t at = c->shown_url_.rfind('@', c->shown_url_.find('/', authority));
  if (at != std::string::npos && at >= authority)
    c->shown_url_.erase(authority, at + 1 - authority);
  c->curl_ = curl_easy_init();
  if (c->curl_ == nullptr) return Status::IoError("curl_easy_init failed");
  return c;
}

ClickHouseHttp::~ClickHouseHttp() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<std::string> ClickHouseHttp::post(const std::string& params, std::string_view body) {
  CURL* curl = static_cast<CURL*>(curl_);
  std::string answer;
  const std::string target = url_ + "?" + params;
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  if (cancel_ != nullptr) {
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, cancelled);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(cancel_));
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  }
  // No "Expect: 100-continue" round trip before each insert.
  curl_slist* headers = curl_slist_append(nullptr, "Expect:");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    return Status::IoError(fmt::format("ClickHouse at {}: cancelled", shown_url_));
  }
  if (rc != CURLE_OK) {
    return Status::IoError(
        fmt::format("ClickHouse at {}: {}", shown_url_, error[0] ? error : curl_easy_strerror(rc)));
  }
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) {
    return Status::IoError(
        fmt::format("ClickHouse at {}: HTTP {}: {}", shown_url_, code, first_line(answer)));
  }
  return answer;
}

Result<std::string> ClickHouseHttp::query(std::string_view sql) { return post("", sql); }

Result<uint64_t> ClickHouseHttp::query_count(std::string_view sql) {
  auto answer = query(sql);
  if (!answer.ok()) return answer.status();
  uint64_t n = 0;
  const std::string& s = *answer;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || (end != s.data() + s.size() && *end != '\n')) {
    return Status::IoError(fmt::format("ClickHouse at {}: expected a number from '{}', got '{}'",
                                       shown_url_, sql, first_line(s)));
  }
  return n;
}

Status ClickHouseHttp::insert_native(std::string_view table, std::string_view native,
                                     bool compress) {
  CURL* curl = static_cast<CURL*>(curl_);
  std::string params = "query=" + escape(curl, fmt::format("INSERT INTO {} FORMAT Native", table));
  std::string_view body = native;
  if (compress) {
    params += "&decompress=1&http_native_compression_disable_checksumming_on_decompress=1";
    compressed_.clear();
    compress_blocks(native, &compressed_);
    body = compressed_;
  }
  auto answer = post(params, body);
  return answer.ok() ? Status::Ok() : answer.status();
}

}  // namespace nanotrace::ship
