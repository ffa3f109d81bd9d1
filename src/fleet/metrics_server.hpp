// The agent's HTTP endpoint: GET /metrics answers the text a callback renders, in the
// OpenMetrics text format (application/openmetrics-text), over libmicrohttpd (Debian's
// well-kept embeddable HTTP server). Anything else is 404; only GET is served.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

class MetricsServer {
 public:
  // Serves on address "HOST:PORT" (an IPv4 address). Errors: kInvalidArgument (a bad
  // address), kIoError (cannot listen).
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address,
                                                      std::function<std::string()> render);
  ~MetricsServer();
  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanotrace::fleet
