// Putting one node's clock on a reference node's timeline (`nanotrace merge`): the same clock
// when both ran on one machine in one boot, else through their clock pairs and CLOCK_REALTIME,
// with the error bound that follows. Internal header.
#pragma once

#include <cstdint>
#include <string>

#include "base/node_meta.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::rec {

struct Alignment {
  uint32_t kind = 0;  // file::NodeAlignment
  uint64_t node_ticks = 0, trace_ticks = 0, num = 1, den = 1;
  uint64_t pair_error_ns = 0;   // from the pairs' brackets
  uint64_t error_bound_ns = 0;  // kUnknownBound when a sync bound is unknown
  std::string note;             // something the user should know, or ""
};

// How `node` maps onto `reference`'s clock (reference itself: the identity).
Result<Alignment> align_node(const file::NodePayload& reference, const file::NodePayload& node,
                             bool is_reference);

// Writes the alignment into a payload.
void apply_alignment(const Alignment& a, file::NodePayload* node);

}  // namespace nanotrace::rec
