// The NODE chunk of a trace file (docs/format.md, "Nodes"): which machine the processes of a
// file ran on and how its clock relates to wall-clock time. Every snapshot and recording
// writes one (the node's identity, clock <-> CLOCK_REALTIME pairs taken at the end, the
// clock-sync daemon's view of the error, the trigger that froze the rings); `nanotrace merge`
// writes one per node of a multi-node file, with how the node's clock maps onto the file's.
// Encoded by the recorder (src/record/node_clock.cc) and the merge, decoded and checked by the
// reader: every field is untrusted.
#pragma once

#include <cstdint>
#include <string>

#include "nanotrace/status.hpp"

namespace nanotrace::file {

inline constexpr uint32_t kNodeMagic = 0x444e544e;  // "NTND"
inline constexpr uint32_t kNodeVersion = 1;
inline constexpr uint32_t kMaxNodes = 4096;       // nodes a file may hold
inline constexpr uint32_t kNodeMaxPairs = 8;      // clock pairs per node
inline constexpr uint64_t kUnknownBound = ~0ull;  // error_bound_ns, sync_bound_ns: not known

// Taken at the end of a snapshot or recording: the clock of the records (TSC ticks, or
// CLOCK_MONOTONIC ns, as the processes' clock_kind says) read before and after
// CLOCK_REALTIME, so the realtime value lies between the two.
struct NodeClockPair {
  uint64_t ticks_before;
  uint64_t realtime_ns;
  uint64_t monotonic_ns;
  uint64_t ticks_after;
};
static_assert(sizeof(NodeClockPair) == 32);

enum class SyncSource : uint32_t {
  kUnknown = 0,  // no clock-sync daemon could be asked
  kChrony = 1,   // chronyc tracking
  kPtp = 2,      // ptp4l (pmc TIME_STATUS_NP)
};
// "chrony", "ptp4l" or "unknown" (any other value too): the name readers and metrics show.
const char* sync_source_name(SyncSource source);

enum class NodeAlignment : uint32_t {
  kOwn = 0,          // a node's own file: its clock is the file's
  kReference = 1,    // merge: the node the others are aligned to (its clock is the file's)
  kSharedClock = 2,  // merge: same machine and boot as the reference: the same clock, exact
  kRealtime = 3,     // merge: mapped through the clock pairs and CLOCK_REALTIME
};

struct NodePayload {
  uint32_t magic;          // kNodeMagic
  uint32_t version;        // kNodeVersion
  uint32_t node;           // index of the node in the file, 0, 1, 2, ...
  uint32_t first_process;  // process index of its first process (the next node's starts after)
  uint32_t clock_kind;     // abi::ClockKind of its records
  uint32_t pair_count;     // valid entries of pairs, 1 to kNodeMaxPairs
  uint64_t ticks_per_second;
  char hostname[64];            // NUL-terminated, printable
  char machine_id[48];          // /etc/machine-id
  char boot_id[48];             // /proc/sys/kernel/random/boot_id
  uint32_t sync_source;         // SyncSource
  uint32_t sync_flags;          // bit 0: the daemon says the clock is synchronised
  int64_t sync_offset_ns;       // chrony: system time offset; ptp: master offset
  uint64_t sync_root_delay_ns;  // chrony only
  uint64_t sync_root_dispersion_ns;
  uint64_t sync_bound_ns;   // the clock's error against true time, kUnknownBound if not known
  char sync_reference[32];  // chrony: the reference's name or address; ptp: "ptp4l"
  uint32_t origin_present;  // 1: a trigger of this node fired, the fields below say where
  uint32_t origin_process;  // process index in the file
  uint32_t origin_pid;
  uint32_t origin_tid;
  uint32_t origin_slot;
  uint32_t origin_event;  // event id in that process's table
  uint64_t origin_seq;    // per-thread record number of the matching record
  uint64_t origin_ticks;  // its clock value (the node's own clock)
  uint32_t alignment;     // NodeAlignment
  uint32_t reserved;
  // The file's clock value of a node clock value t:
  // trace_ticks + (t - node_ticks) * num / den (kOwn, kReference, kSharedClock: the identity).
  uint64_t align_node_ticks;
  uint64_t align_trace_ticks;
  uint64_t align_num;
  uint64_t align_den;
  uint64_t error_bound_ns;  // of its times against the reference node's; kUnknownBound: unknown
  NodeClockPair pairs[kNodeMaxPairs];
};
static_assert(sizeof(NodePayload) == 608);

// Checks a NODE payload: exact size, magic, version, bounded strings without control
// characters, pair counts and brackets, a known sync source and alignment, a mapping with
// non-zero rates. kCorrupt with the reason.
Result<NodePayload> decode_node(const void* data, size_t size);
// A fixed buffer's string (bounded by the buffer).
std::string node_text(const char* buffer, size_t size);
// Copies text into a fixed buffer, cut to fit, control characters replaced by '_'.
void set_node_text(char* buffer, size_t size, const std::string& text);
// The tightest pair: its midpoint tick, its realtime, and half its bracket in ticks.
struct NodeInstant {
  uint64_t ticks = 0;
  uint64_t realtime_ns = 0;
  uint64_t half_bracket_ticks = 0;
};
NodeInstant best_pair(const NodePayload& node);
// The file's clock value of one of the node's clock values (the alignment above; 0 if it
// would fall before 0).
uint64_t align_ticks(const NodePayload& node, uint64_t ticks);
inline bool aligned_identity(const NodePayload& n) {
  return n.align_node_ticks == n.align_trace_ticks && n.align_num == n.align_den;
}

}  // namespace nanotrace::file
