// /metrics over libmicrohttpd (metrics_server.hpp).
#include "fleet/metrics_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include <cstring>

namespace nanotrace::fleet {

struct MetricsServer::Impl {
  MHD_Daemon* daemon = nullptr;
  std::function<std::string(MetricsFormat)> render;
  ~Impl() {
    if (daemon != nullptr) MHD_stop_daemon(daemon);
  }
};

namespace {

MHD_Result answer(void* closure, MHD_Connection* connection, const char* url, const char* method,
                  const char*, const char*, size_t*, void**) {
  auto* impl = static_cast<MetricsServer::Impl*>(closure);
  std::string body;
  unsigned status = MHD_HTTP_OK;
  const char* accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Accept");
  const bool openmetrics =
      accept != nullptr && std::strstr(accept, "application/openmetrics-text") != nullptr;
  const char* type = openmetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                 : "text/plain; version=0.0.4; charset=utf-8";
  if (std::strcmp(method, "GET") != 0) {
    status = MHD_HTTP_METHOD_NOT_ALLOWED;
    body = "only GET\n";
    type = "text/plain";
  } else if (std::strcmp(url, "/metrics") != 0) {
    status = MHD_HTTP_NOT_FOUND;
    body = "not found: try /metrics\n";
    type = "text/plain";
  } else {
    body = impl->render(openmetrics ? MetricsFormat::kOpenMetrics : MetricsFormat::kPrometheusText);
  }
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(response, "Content-Type", type);
  MHD_Result r = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return r;
}

}  // namespace

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() = default;

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(
    const std::string& address, std::function<std::string(MetricsFormat)> render) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return Status::Invalid("metrics address must be HOST:PORT");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  int port = std::atoi(address.c_str() + colon + 1);
  if (port <= 0 || port > 65535 ||
      inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
    return Status::Invalid("bad metrics address '" + address + "' (e.g. 127.0.0.1:9464)");
  }
  sa.sin_port = htons(static_cast<uint16_t>(port));
  auto impl = std::make_unique<Impl>();
  impl->render = std::move(render);
  impl->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                                  static_cast<uint16_t>(port), nullptr, nullptr, answer, impl.get(),
                                  MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT, 16u,
                                  MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  if (impl->daemon == nullptr) return Status::IoError("cannot serve /metrics on " + address);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

}  // namespace nanotrace::fleet
