// Aligning a node's clock to the reference node's (record/node_alignment.hpp).
//
// One machine, one boot: the processes' clock is the machine's (an invariant TSC, or
// CLOCK_MONOTONIC), so the ticks compare as they are and the merged order is exact. The pairs
// are still checked against each other: if CLOCK_REALTIME moved between the two files by more
// than the pairs and a slewing daemon explain, the wall clock was stepped, which is worth saying
// (the ticks stay exact).
//
// Two machines: node clock value t is at wall time R_n + (t - T_n) / f_n by its tightest pair
// (T_n, R_n) and rate f_n; the reference clock value of that wall time is
// T_0 + (R - R_0) * f_0, so t maps to T_0 + (R_n - R_0) * f_0 + (t - T_n) * f_0 / f_n. The
// error: each pair's half bracket (where in it the wall clock was read is unknown), plus each
// machine's clock error against true time, as its sync daemon bounds it.
#include "record/node_alignment.hpp"

#include <cmath>
#include <cstdlib>

namespace nanotrace::rec {
namespace {

uint64_t ticks_to_ns(uint64_t ticks, uint64_t hz) {
  return static_cast<uint64_t>(
      std::ceil(static_cast<double>(ticks) * 1e9 / static_cast<double>(hz)));
}

std::string name_of(const file::NodePayload& n) {
  std::string host = file::node_text(n.hostname, sizeof(n.hostname));
  return host.empty() ? "node " + std::to_string(n.node) : host;
}

}  // namespace

void apply_alignment(const Alignment& a, file::NodePayload* node) {
  node->alignment = a.kind;
  node->align_node_ticks = a.node_ticks;
  node->align_trace_ticks = a.trace_ticks;
  node->align_num = a.num;
  node->align_den = a.den;
  node->error_bound_ns = a.error_bound_ns;
}

Result<Alignment> align_node(const file::NodePayload& reference, const file::NodePayload& node,
                             bool is_reference) {
  Alignment a;
  if (is_reference) {
    a.kind = static_cast<uint32_t>(file::NodeAlignment::kReference);
    return a;
  }
  const uint64_t f0 = reference.ticks_per_second, fn = node.ticks_per_second;
  if (f0 < 1000000 || fn < 1000000) {
    return Status::Invalid(name_of(f0 < 1000000 ? reference : node) +
                           ": the clock rate is not known, so its clock cannot be aligned");
  }
  const file::NodeInstant p0 = file::best_pair(reference), pn = file::best_pair(node);
  a.pair_error_ns = ticks_to_ns(p0.half_bracket_ticks, f0) + ticks_to_ns(pn.half_bracket_ticks, fn);
  const std::string boot0 = file::node_text(reference.boot_id, sizeof(reference.boot_id));
  const std::string bootn = file::node_text(node.boot_id, sizeof(node.boot_id));
  const bool same_rate = std::llabs(static_cast<long long>(f0) - static_cast<long long>(fn)) <=
                         static_cast<long long>(f0 / 1000);
  if (!boot0.empty() && boot0 == bootn && reference.clock_kind == node.clock_kind && same_rate) {
    a.kind = static_cast<uint32_t>(file::NodeAlignment::kSharedClock);
    // Where the reference's pair puts the node's wall clock reading, against where it was.
    const double apart_ns = (static_cast<double>(pn.ticks) - static_cast<double>(p0.ticks)) * 1e9 /
                            static_cast<double>(f0);
    const double predicted = static_cast<double>(p0.realtime_ns) + apart_ns;
    const double miss = std::fabs(static_cast<double>(pn.realtime_ns) - predicted);
    const double allowed = static_cast<double>(a.pair_error_ns) + 1e6 + 1e-3 * std::fabs(apart_ns);
    if (miss > allowed) {
      a.note =
          name_of(node) + ": shares the reference's clock (same boot), but CLOCK_REALTIME moved " +
          std::to_string(static_cast<int64_t>(miss / 1e3)) +
          " us against it between the files (a stepped wall clock); aligned by the shared clock";
    }
    return a;
  }
  a.kind = static_cast<uint32_t>(file::NodeAlignment::kRealtime);
  const __int128 wall_apart = static_cast<__int128>(pn.realtime_ns) - p0.realtime_ns;
  const __int128 trace = static_cast<__int128>(p0.ticks) + wall_apart * f0 / 1000000000;
  if (trace < 0 || trace > static_cast<__int128>(1ull << 62)) {
    return Status::Invalid(name_of(node) + ": its snapshot is " +
                           std::to_string(static_cast<int64_t>(-wall_apart / 1000000000)) +
                           " s older than the reference's clock; give the oldest snapshot first");
  }
  a.node_ticks = pn.ticks;
  a.trace_ticks = static_cast<uint64_t>(trace);
  a.num = f0;
  a.den = fn;
  const bool known =
      reference.sync_bound_ns != file::kUnknownBound && node.sync_bound_ns != file::kUnknownBound;
  a.error_bound_ns =
      known ? a.pair_error_ns + reference.sync_bound_ns + node.sync_bound_ns : file::kUnknownBound;
  return a;
}

}  // namespace nanotrace::rec
