// The text of a Prometheus / OpenMetrics label value, for every /metrics page the project
// serves (the fleet agent's, and the live view's pair gauges within it).
#pragma once

#include <string>

namespace nanotrace::openmetrics {

// v with backslash, double quote and newline escaped, as the exposition formats require.
inline std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace nanotrace::openmetrics
