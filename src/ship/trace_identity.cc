// A shipped trace's identity (TraceRows::open): the nodes the file records and their names,
// and the trace id, a hash of what makes the trace distinct and of what reading it found
// damaged (trace_rows.hpp says what it covers).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/node_identity.hpp"
#include "base/utf8.hpp"
#include "ship/trace_rows.hpp"

namespace nanotrace::ship {
namespace {

// FNV-1a, 64 bits: a stable hash of the trace's identity text (the same on every build).
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

Damage damage_of(const Trace& trace, const std::vector<ThreadStats>& streams) {
  Damage d;
  d.warning = trace.warning();
  for (const ThreadStats& s : streams) {
    d.corrupt_blocks += s.corrupt_blocks;
    d.unreadable += s.unreadable;
  }
  if (d.corrupt_blocks == 0 && d.warning.empty()) return d;
  // What each stream delivered: a copy damaged elsewhere, or cut elsewhere, reads otherwise.
  for (size_t i = 0; i < streams.size(); ++i) {
    const ThreadStats& s = streams[i];
    d.digest += fmt::format("|d{} {} {} {} {}", i, s.records, s.overwritten, s.corrupt_blocks,
                            s.unreadable);
  }
  return d;
}

Damage read_damage(Trace& trace) {
  std::vector<ThreadStats> streams;
  for (const auto& spans : trace.read_spans()) {
    RecordSpan span;
    while (spans->next(&span)) {
    }
    streams.push_back(spans->stats());
  }
  for (uint32_t c = 0; c < trace.kernel_cpu_count(); ++c) {
    auto cpu = trace.read_kernel_cpu(c);
    Record r;
    while (cpu->next(&r)) {
    }
    if (!cpu->threads().empty()) streams.push_back(cpu->threads()[0]);
  }
  return damage_of(trace, streams);
}

Result<std::unique_ptr<TraceRows>> TraceRows::open(Trace& trace, const std::string& node,
                                                   std::vector<PairRule> pairs,
                                                   const std::string& damage_digest) {
  if (!node.empty() && trace.nodes().size() > 1) {
    return Status::Invalid(fmt::format("--node: the trace records {} nodes, each with its own name",
                                       trace.nodes().size()));
  }
  std::unique_ptr<TraceRows> rows(new TraceRows(trace, std::move(pairs)));
  for (const NodeInfo& n : trace.nodes()) rows->nodes_.push_back({utf8::valid(n.hostname)});
  if (rows->nodes_.empty()) rows->nodes_.push_back({});
  // The identity holds the names the file records, not the name given (--node): one file is
  // one trace, whatever it is called.
  std::string identity;
  for (const NodeRow& n : rows->nodes_) {
    if (!n.name.empty()) identity += "|n" + n.name;
  }
  if (!node.empty()) rows->nodes_[0].name = utf8::valid(node);
  if (rows->nodes_[0].name.empty()) rows->nodes_[0].name = utf8::valid(sys::hostname());
  if (rows->nodes_[0].name.empty()) rows->nodes_[0].name = "unknown";
  for (const ProcessInfo& p : trace.processes()) {
    identity += fmt::format("|p{} {} {} {} {}", p.pid, p.ticks_per_second, p.clock_start.ticks,
                            p.clock_start.realtime_ns, p.clock_start.monotonic_ns);
  }
  for (const ThreadInfo& t : trace.threads()) {
    identity += fmt::format("|t{} {} {} {} {}", t.pid, t.slot, t.generation, t.tid, t.written);
  }
  rows->trace_id_ = fnv1a(identity + damage_digest);
  return rows;
}

std::vector<std::string> TraceRows::node_names() const {
  std::vector<std::string> out;
  for (const NodeRow& n : nodes_) out.push_back(n.name);
  return out;
}

uint32_t TraceRows::node_of_process(uint32_t process) const {
  const std::vector<ProcessInfo>& all = trace_.processes();
  const uint32_t node = process < all.size() ? all[process].node : 0;
  return node < nodes_.size() ? node : 0;
}

}  // namespace nanotrace::ship
