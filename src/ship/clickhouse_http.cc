// ClickHouseHttp: ClickHouse's HTTP interface through one libcurl easy handle (one kept-alive
// connection), and ClickHouse's compressed-block framing around zstd frames.
#include "ship/clickhouse_http.hpp"

#include <curl/curl.h>
#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>

#include "ship/clickhouse_answer.hpp"

namespace nanotrace::ship {
namespace {

constexpr size_t kBlockBytes = 1 << 20;  // data per compressed block (ClickHouse's own size)
constexpr uint8_t kMethodZstd = 0x90;
constexpr size_t kHeaderBytes = 16 + 1 + 4 + 4;  // checksum, method, two sizes

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// A request body of several pieces, handed to libcurl as it asks for it.
struct BodyReader {
  const std::vector<std::string_view>* pieces;
  size_t piece = 0, at = 0;
};

size_t read_body(char* out, size_t size, size_t n, void* data) {
  auto* r = static_cast<BodyReader*>(data);
  size_t room = size * n, done = 0;
  while (done < room && r->piece < r->pieces->size()) {
    std::string_view p = (*r->pieces)[r->piece];
    const size_t take = std::min(room - done, p.size() - r->at);
    std::memcpy(out + done, p.data() + r->at, take);
    done += take;
    r->at += take;
    if (r->at == p.size()) {
      ++r->piece;
      r->at = 0;
    }
  }
  return done;
}

// Keeps the X-ClickHouse-Exception-Code header's value (newer servers send it).
size_t header_line(char* data, size_t size, size_t n, void* out) {
  constexpr std::string_view kName = "x-clickhouse-exception-code:";
  const std::string_view line(data, size * n);
  if (line.size() > kName.size() && line.size() < 64) {
    std::string lower(line.substr(0, kName.size()));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kName) {
      std::string_view v = line.substr(kName.size());
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      static_cast<std::string*>(out)->assign(v.substr(0, v.find_first_of("\r\n")));
    }
  }
  return size * n;
}

// A connection that failed: transient (kIoError) unless the URL or TLS set-up is wrong, which
// no retry mends (kInvalidArgument).
bool refused_by_setup(CURLcode rc) {
  switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_LOGIN_DENIED:
      return true;
    default:
      return false;
  }
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
  // The host, without user, password and port: a loopback address is this machine.
  std::string host =
      c->shown_url_.substr(authority, c->shown_url_.find('/', authority) - authority);
  host = host[0] == '[' ? host.substr(0, host.find(']') + 1) : host.substr(0, host.find(':'));
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  const bool ipv4 = host.find_first_not_of("0123456789.") == std::string::npos;
  c->loopback_ = host == "localhost" || (ipv4 && host.rfind("127.", 0) == 0) || host == "[::1]";
  c->curl_ = curl_easy_init();
  if (c->curl_ == nullptr) return Status::IoError("curl_easy_init failed");
  return c;
}

ClickHouseHttp::~ClickHouseHttp() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<std::string> ClickHouseHttp::post(const std::string& params,
                                         const std::vector<std::string_view>& body) {
  CURL* curl = static_cast<CURL*>(curl_);
  std::string answer;
  const std::string target = url_ + "?" + params;
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  // The body as it lies, piece after piece (a Native block's columns): no copy into one buffer.
  BodyReader reader{&body};
  curl_off_t size = 0;
  for (std::string_view piece : body) size += static_cast<curl_off_t>(piece.size());
  curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
  curl_easy_setopt(curl, CURLOPT_READDATA, &reader);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, size);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  std::string exception_code;
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, header_line);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &exception_code);
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
    std::string why =
        fmt::format("ClickHouse at {}: {}", shown_url_, error[0] ? error : curl_easy_strerror(rc));
    return refused_by_setup(rc) ? Status::Invalid(std::move(why)) : Status::IoError(std::move(why));
  }
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) return server_error(parse_error_answer(code, answer, exception_code));
  return answer;
}

Status ClickHouseHttp::server_error(const ServerError& e) const {
  const std::string code =
      e.code < 0 ? fmt::format("HTTP {}", e.http_status)
                 : fmt::format("code {}{}{}", e.code, e.name.empty() ? "" : " ", e.name);
  if (e.transient) {
    return Status::IoError(fmt::format("ClickHouse at {}: {}: {}", shown_url_, code, e.message));
  }
  return Status::Invalid(
      fmt::format("ClickHouse at {} refused: {}: {}", shown_url_, code, e.message));
}

Result<std::string> ClickHouseHttp::query(std::string_view sql) { return post("", {sql}); }

Result<uint64_t> ClickHouseHttp::query_count(std::string_view sql) {
  auto answer = query(sql);
  if (!answer.ok()) return answer.status();
  auto n = parse_count(*answer);
  if (!n.ok()) {
    return Status::IoError(fmt::format("ClickHouse at {}: {} from '{}'", shown_url_,
                                       n.status().message(), printable(sql, 120)));
  }
  return *n;
}

Result<std::vector<std::vector<std::string>>> ClickHouseHttp::query_rows(std::string_view sql,
                                                                         size_t columns) {
  auto answer = query(sql);
  if (!answer.ok()) return answer.status();
  auto rows = parse_tab_separated(*answer, columns);
  if (!rows.ok()) {
    return Status::IoError(fmt::format("ClickHouse at {}: {} from '{}'", shown_url_,
                                       rows.status().message(), printable(sql, 120)));
  }
  return std::move(*rows);
}

Status ClickHouseHttp::insert_native(std::string_view table, std::string_view native,
                                     bool compress) {
  return insert_native(table, std::vector<std::string_view>{native}, compress);
}

Status ClickHouseHttp::insert_native(std::string_view table,
                                     const std::vector<std::string_view>& native, bool compress) {
  CURL* curl = static_cast<CURL*>(curl_);
  std::string params = "query=" + escape(curl, fmt::format("INSERT INTO {} FORMAT Native", table));
  if (compress) {
    params += "&decompress=1&http_native_compression_disable_checksumming_on_decompress=1";
    compressed_.clear();
    for (std::string_view piece : native) compress_blocks(piece, &compressed_);
    auto answer = post(params, {std::string_view(compressed_)});
    return answer.ok() ? Status::Ok() : answer.status();
  }
  auto answer = post(params, native);
  return answer.ok() ? Status::Ok() : answer.status();
}

}  // namespace nanotrace::ship
