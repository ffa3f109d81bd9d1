// Building and writing the NODE chunk of a snapshot or recording (record/node_clock.hpp).
#include "record/node_clock.hpp"

#include <x86intrin.h>

#include <algorithm>
#include <cstring>

#include "base/clock.hpp"
#include "reader/trace_internals.hpp"
#include "record/clock_sync.hpp"

namespace nanotrace::rec {
namespace {

uint64_t read_ticks(abi::ClockKind kind) {
  unsigned aux;
  return kind == abi::ClockKind::kTsc ? __rdtscp(&aux) : sys::monotonic_ns();
}

// The records' clock read on either side of CLOCK_REALTIME (and CLOCK_MONOTONIC).
file::NodeClockPair take_pair(abi::ClockKind kind) {
  file::NodeClockPair p;
  p.ticks_before = read_ticks(kind);
  p.realtime_ns = sys::realtime_ns();
  p.monotonic_ns = sys::monotonic_ns();
  p.ticks_after = read_ticks(kind);
  return p;
}

// The clock's rate, measured from the process's start pair to now (the longest baseline it
// has), or as the process measured it.
uint64_t ticks_per_second(const ProcessInfo& p, const file::NodeInstant& now,
                          uint64_t now_monotonic) {
  if (p.clock == abi::ClockKind::kMonotonic) return 1000000000ull;
  const abi::ClockPair& start = p.clock_start;
  if (now_monotonic > start.monotonic_ns + 1000000 && now.ticks > start.ticks) {
    return static_cast<uint64_t>(static_cast<double>(now.ticks - start.ticks) * 1e9 /
                                 static_cast<double>(now_monotonic - start.monotonic_ns));
  }
  return p.ticks_per_second;
}

// The trigger facts of a live process's header as they are now (the Trace's copy is from
// when it was opened).
TriggerInfo current_trigger(const Trace& trace) {
  if (trace.is_file()) return trace.process().trigger;
  auto* h = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(trace));
  return reader::trigger_info(*h);
}

}  // namespace

file::NodePayload node_payload(const std::vector<const Trace*>& processes,
                               const ClockSync* known_sync, const sys::NodeIdentity* node) {
  file::NodePayload n;
  std::memset(&n, 0, sizeof(n));
  n.magic = file::kNodeMagic;
  n.version = file::kNodeVersion;
  const ProcessInfo p = processes.empty() ? ProcessInfo{} : processes[0]->process();
  const auto kind = p.clock;
  n.clock_kind = static_cast<uint32_t>(kind);
  n.pair_count = file::kNodeMaxPairs;
  for (file::NodeClockPair& pair : n.pairs) pair = take_pair(kind);
  const file::NodeInstant now = file::best_pair(n);
  uint64_t now_monotonic = 0;
  for (const file::NodeClockPair& pair : n.pairs)
    now_monotonic = std::max(now_monotonic, pair.monotonic_ns);
  n.ticks_per_second = ticks_per_second(p, now, now_monotonic);

  const sys::NodeIdentity id = node != nullptr ? *node : sys::node_identity();
  file::set_node_text(n.hostname, sizeof(n.hostname), id.hostname);
  file::set_node_text(n.machine_id, sizeof(n.machine_id), id.machine_id);
  file::set_node_text(n.boot_id, sizeof(n.boot_id), id.boot_id);

  const ClockSync sync = known_sync != nullptr ? *known_sync : read_clock_sync();
  n.sync_source = static_cast<uint32_t>(sync.source);
  n.sync_flags = sync.synchronised ? 1 : 0;
  n.sync_offset_ns = sync.offset_ns;
  n.sync_root_delay_ns = sync.root_delay_ns;
  n.sync_root_dispersion_ns = sync.root_dispersion_ns;
  n.sync_bound_ns = sync.bound_ns;
  file::set_node_text(n.sync_reference, sizeof(n.sync_reference), sync.reference);

  for (uint32_t i = 0; i < processes.size() && i <= 0xffff; ++i) {
    const TriggerInfo t = current_trigger(*processes[i]);
    if ((t.state != abi::TriggerState::kFired && t.state != abi::TriggerState::kFrozen) ||
        t.event == 0) {
      continue;
    }
    n.origin_present = 1;
    n.origin_process = i;
    n.origin_pid = processes[i]->process().pid;
    n.origin_tid = t.tid;
    n.origin_slot = t.slot;
    n.origin_event = t.event;
    n.origin_seq = t.seq;
    n.origin_ticks = t.ticks;
    break;
  }
  n.alignment = static_cast<uint32_t>(file::NodeAlignment::kOwn);
  n.align_num = n.align_den = 1;
  n.error_bound_ns = 0;
  return n;
}

Status write_node_chunk(FileWriter& out, const std::vector<const Trace*>& processes,
                        const ClockSync* sync, const sys::NodeIdentity* node) {
  const file::NodePayload n = node_payload(processes, sync, node);
  return out.write_chunk(file::ChunkType::kNode, &n, sizeof(n));
}

}  // namespace nanotrace::rec
