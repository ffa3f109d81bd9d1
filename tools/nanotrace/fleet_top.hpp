// `nanotrace fleet top`'s text: every node's operations in flight merged, oldest first, each
// with its node, then per node its rates and latency per pair rule (fleet_top.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "fleet/message_top.hpp"

namespace nanotrace::cli {

// answers: the readable answers, by node (those with an error are left to the error lines);
// waiters: the operations in flight listed; now_ns: CLOCK_REALTIME, for each frame's age.
void print_fleet_top(const std::vector<fleet::TopAnswer>& answers, uint32_t waiters,
                     uint64_t now_ns);

}  // namespace nanotrace::cli
