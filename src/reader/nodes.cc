// The nodes of a trace file (NODE chunks, base/node_meta.hpp) as Trace::nodes(): who each
// machine was, its clock pairs and sync quality, the trigger that froze it, and how its clock
// was put on the trace's timeline. A process of a node whose clock is not the trace's has its
// clock pairs and trigger stamps mapped here; its records are mapped as they are read
// (FileThreadStream).
#include "base/node_meta.hpp"
#include "nanotrace/reader.hpp"
#include "reader/trace_file.hpp"

namespace nanotrace {
namespace {

const char* alignment_name(uint32_t alignment) {
  switch (static_cast<file::NodeAlignment>(alignment)) {
    case file::NodeAlignment::kReference:
      return "reference";
    case file::NodeAlignment::kSharedClock:
      return "shared-clock";
    case file::NodeAlignment::kRealtime:
      return "realtime";
    default:
      return "own";
  }
}

NodeInfo node_info(const file::NodePayload& n) {
  NodeInfo info;
  info.index = n.node;
  info.hostname = file::node_text(n.hostname, sizeof(n.hostname));
  info.machine_id = file::node_text(n.machine_id, sizeof(n.machine_id));
  info.boot_id = file::node_text(n.boot_id, sizeof(n.boot_id));
  info.clock = n.clock_kind == 1 ? abi::ClockKind::kMonotonic : abi::ClockKind::kTsc;
  info.ticks_per_second = n.ticks_per_second;
  for (uint32_t i = 0; i < n.pair_count; ++i) {
    const file::NodeClockPair& p = n.pairs[i];
    info.clock_pairs.push_back({p.ticks_before, p.realtime_ns, p.monotonic_ns, p.ticks_after});
  }
  info.sync_source = file::sync_source_name(static_cast<file::SyncSource>(n.sync_source));
  info.synchronised = n.sync_flags & 1;
  info.sync_offset_ns = n.sync_offset_ns;
  info.sync_root_delay_ns = n.sync_root_delay_ns;
  info.sync_root_dispersion_ns = n.sync_root_dispersion_ns;
  info.sync_bound_ns = n.sync_bound_ns;
  info.sync_reference = file::node_text(n.sync_reference, sizeof(n.sync_reference));
  info.alignment = alignment_name(n.alignment);
  info.error_bound_ns = n.error_bound_ns;
  return info;
}

}  // namespace

void Trace::load_nodes() {
  nodes_.clear();
  if (!file_ || file_->nodes.empty()) return;
  for (const file::NodePayload& n : file_->nodes) nodes_.push_back(node_info(n));
  for (uint32_t i = 0; i < processes_.size() && i < file_->process_node.size(); ++i) {
    const uint32_t index = file_->process_node[i];
    const file::NodePayload& n = file_->nodes[index];
    NodeInfo& node = nodes_[index];
    ProcessInfo& p = processes_[i];
    p.node = index;
    if (node.process_count++ == 0) node.first_process = i;
    if (n.origin_present && file_->processes[i].index == n.origin_process) {
      node.has_origin = true;
      node.origin_process = i;
      node.origin_pid = n.origin_pid;
      node.origin_tid = n.origin_tid;
      node.origin_slot = n.origin_slot;
      node.origin_seq = n.origin_seq;
      node.origin_ticks = file::align_ticks(n, n.origin_ticks);
      const std::vector<EventInfo>& local = i < local_events_.size() ? local_events_[i] : events_;
      if (n.origin_event >= 1 && n.origin_event <= local.size()) {
        node.origin_event = local[n.origin_event - 1].full_name();
      }
    }
    if (file::aligned_identity(n)) continue;
    for (uint64_t* ticks :
         {&p.clock_start.ticks, &p.clock_latest.ticks, &p.trigger.ticks, &p.trigger.frozen_ticks}) {
      if (*ticks != 0) *ticks = file::align_ticks(n, *ticks);
    }
  }
  if (!processes_.empty()) process_ = processes_[0];
}

}  // namespace nanotrace
