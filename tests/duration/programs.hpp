// The programs the duration tests start: the pairs producer and the nanotrace tool.
#pragma once

#include <string>

namespace nanotrace::duration_test {

inline const std::string kProducer = std::string(NANOTRACE_BIN_DIR) + "/nanotrace_pairs_producer";
inline const std::string kCli = std::string(NANOTRACE_BIN_DIR) + "/nanotrace";

}  // namespace nanotrace::duration_test
