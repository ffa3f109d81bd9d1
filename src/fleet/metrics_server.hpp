// The agent's HTTP endpoint: GET /metrics answers the text a callback renders, over
// libmicrohttpd (Debian's well-kept embeddable HTTP server), in the format the scraper asks
// for: the OpenMetrics text format (application/openmetrics-text) when its Accept header names
// it, as Prometheus's does, else Prometheus's text format 0.0.4 (curl, promtool, older
// scrapers). Anything else is 404; only GET is served.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

enum class MetricsFormat {
  kPrometheusText,  // text/plain; version=0.0.4: a counter's HELP and TYPE name its _total
  kOpenMetrics,     // application/openmetrics-text: a counter's family has no _total; # EOF
};

class MetricsServer {
 public:
  // Serves on address "HOST:PORT" (an IPv4 address). Errors: kInvalidArgument (a bad
  // address), kIoError (cannot listen).
  static Result<std::unique_ptr<MetricsServer>> start(
      const std::string& address, std::function<std::string(MetricsFormat)> render);
  ~MetricsServer();
  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanotrace::fleet
