// The traces table's rows (TraceRows::traces_rows), one per node, made after every other row:
// where the node's records came from and on which clock, the span of time and the counts of
// its rows, and where its trigger fired.
#include <chrono>
#include <string>
#include <vector>

#include "ship/trace_rows.hpp"

namespace nanotrace::ship {
namespace {

bool trigger_fired(const TriggerInfo& t) {
  return t.state == abi::TriggerState::kFired || t.state == abi::TriggerState::kFrozen;
}

// Where a node's trigger fired, as the traces row shows it.
struct TriggerRow {
  std::string state = "none", expression, event;
  uint32_t pid = 0, tid = 0;
  uint64_t seq = 0, realtime_ns = 0;
};

}  // namespace

void TraceRows::traces_rows(const std::string& source, NativeBlock* block) const {
  const auto shipped =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  for (uint32_t n = 0; n < nodes_.size(); ++n) trace_row(n, source, shipped, block);
}

void TraceRows::trace_row(uint32_t n, const std::string& source, uint64_t shipped,
                          NativeBlock* block) const {
  const std::vector<ProcessInfo>& processes = trace_.processes();
  const NodeInfo* info = n < trace_.nodes().size() ? &trace_.nodes()[n] : nullptr;
  std::vector<uint32_t> mine;  // the node's processes
  for (uint32_t i = 0; i < processes.size(); ++i) {
    if (node_of_process(i) == n) mine.push_back(i);
  }
  // The trigger: the node's recorded origin (the process whose trigger froze it), else the
  // first of its processes whose trigger fired, else the first's state.
  TriggerRow t;
  const ProcessInfo* fired = nullptr;
  for (uint32_t i : mine) {
    if (fired == nullptr || (!trigger_fired(fired->trigger) && trigger_fired(processes[i].trigger)))
      fired = &processes[i];
  }
  if (info != nullptr && info->has_origin && info->origin_process < processes.size()) {
    const ProcessInfo& p = processes[info->origin_process];
    t = {trigger_state_name(p.trigger.state),
         p.trigger.expression,
         info->origin_event,
         info->origin_pid,
         info->origin_tid,
         info->origin_seq,
         trace_.ticks_to_realtime_ns(info->origin_ticks)};
  } else if (fired != nullptr && trigger_fired(fired->trigger)) {
    const EventInfo* e = trace_.event_by_id(fired->trigger.event);
    t = {trigger_state_name(fired->trigger.state),
         fired->trigger.expression,
         e ? e->full_name() : std::string(),
         fired->pid,
         fired->trigger.tid,
         fired->trigger.seq,
         trace_.ticks_to_realtime_ns(fired->trigger.ticks)};
  } else if (fired != nullptr) {
    t.state = trigger_state_name(fired->trigger.state);
    t.expression = fired->trigger.expression;
  }
  const ProcessInfo& first = mine.empty() ? trace_.process() : processes[mine.front()];
  const NodeRow& node = nodes_[n];
  const uint64_t begin = node.any ? node.first_ns : first_ns_;
  NativeBlock& b = *block;
  size_t c = 0;
  b.put_date(c++, day_of(begin));
  b.put<uint64_t>(c++, trace_id_);
  b.put_string(c++, node.name);
  b.put_text(c++, info ? info->machine_id : std::string());
  b.put_text(c++, info ? info->boot_id : std::string());
  b.put_text(c++, source);
  b.put<uint64_t>(c++, shipped);
  const abi::ClockKind clock = info ? info->clock : first.clock;
  b.put_string(c++, clock == abi::ClockKind::kTsc ? "tsc" : "monotonic");
  b.put<uint64_t>(c++, info ? info->ticks_per_second : first.ticks_per_second);
  // A node's own trace is on its own clock: no error against the trace's timeline.
  b.put<uint64_t>(c++, info ? info->error_bound_ns : 0);
  b.put_text(c++, info ? info->alignment : std::string("own"));
  b.put<uint64_t>(c++, begin);
  b.put<uint64_t>(c++, node.any ? node.last_ns : last_ns_);
  const size_t pids = c++, names = c++;
  for (uint32_t i : mine) {
    b.put<uint32_t>(pids, processes[i].pid);
    b.put_text(names, processes[i].process_name);
  }
  b.end_array(pids);
  b.end_array(names);
  b.put<uint64_t>(c++, node.events);
  b.put<uint64_t>(c++, node.intervals);
  b.put<uint64_t>(c++, node.ios);
  b.put<uint64_t>(c++, node.lost);
  b.put<uint64_t>(c++, node.corrupt_blocks);
  b.put_string(c++, t.state);
  b.put_text(c++, t.expression);
  b.put_text(c++, t.event);
  b.put<uint32_t>(c++, t.pid);
  b.put<uint32_t>(c++, t.tid);
  b.put<uint64_t>(c++, t.seq);
  b.put<uint64_t>(c++, t.realtime_ns);
  for (const ResolvedPair& r : rules_) b.put_text(c, r.rule.label());
  b.end_array(c++);
  b.end_row();
}

}  // namespace nanotrace::ship
