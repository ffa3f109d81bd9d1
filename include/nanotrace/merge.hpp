// `nanotrace merge`: several machines' snapshots (or recordings) into one multi-node trace file,
// node, then process, then thread (docs/format.md, "Nodes"). The raw ring bytes are copied as
// they are; each node's NODE chunk says how its clock maps onto the file's: the first input is
// the reference; a node of the same machine and boot shares its clock exactly; any other is
// aligned through the clock pairs each file took and CLOCK_REALTIME, within an error bound of
// the pairs' brackets plus both machines' clock-sync bounds (unknown when a machine's sync is).
// Events of one node keep their order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace {

struct MergedNode {
  std::string source;  // the input file
  std::string hostname;
  uint32_t processes = 0;
  uint64_t data_bytes = 0;
  std::string alignment;        // "reference", "shared-clock" or "realtime"
  uint64_t error_bound_ns = 0;  // against the reference; UINT64_MAX: unknown
  uint64_t pair_error_ns = 0;   // the clock pairs' part of it (known even when the sync's is not)
  uint64_t sync_bound_ns = 0;   // its clock-sync bound, UINT64_MAX: unknown
  std::string sync_source;      // "chrony", "ptp4l", "unknown"
};

// The record whose trigger froze the rings, earliest on the merged timeline.
struct MergedOrigin {
  bool found = false;
  uint32_t node = 0;
  std::string hostname;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t seq = 0;
  std::string event;
  uint64_t realtime_ns = 0;  // its wall-clock time on the merged timeline
};

struct MergeSummary {
  std::vector<MergedNode> nodes;
  MergedOrigin origin;
  uint64_t file_bytes = 0;
  uint64_t data_bytes = 0;
  uint64_t records = 0;  // as the inputs' END chunks counted them
  double seconds = 0;
  std::vector<std::string> notes;  // what was left out, and why
};

// Merges inputs (trace files of one node each) into output (created, mode 0600, never one of
// the inputs). Errors: an input that cannot be read, is damaged or cut short (a DATA chunk
// that fails its checksum included), holds no node description (written before version 3)
// or is already a merge; more than 65535 processes; an output that cannot be written.
Result<MergeSummary> merge_traces(const std::vector<std::string>& inputs,
                                  const std::string& output);

}  // namespace nanotrace
