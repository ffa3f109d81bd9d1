// Printing the nodes of a trace (node_output.hpp).
#include "node_output.hpp"

#include <fmt/format.h>
#include <time.h>

#include <cstdlib>

#include "base/utf8.hpp"

namespace nanotrace::cli {
namespace {

std::string duration_text(uint64_t ns) {
  if (ns < 1000) return fmt::format("{} ns", ns);
  if (ns < 1000000) return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3);
  if (ns < 1000000000) return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
  return fmt::format("{:.2f} s", static_cast<double>(ns) / 1e9);
}

const NodeInfo* first_origin(const Trace& trace) {
  const NodeInfo* best = nullptr;
  for (const NodeInfo& n : trace.nodes()) {
    if (n.has_origin && (best == nullptr || n.origin_ticks < best->origin_ticks)) best = &n;
  }
  return best;
}

}  // namespace

nlohmann::json error_bound_json(uint64_t ns) {
  return ns == kUnknownErrorBound ? nlohmann::json(nullptr) : nlohmann::json(ns);
}

std::string error_bound_text(uint64_t ns, bool exact_when_zero) {
  if (ns == kUnknownErrorBound) return "unknown";
  if (ns == 0 && exact_when_zero) return "exact";
  return "±" + duration_text(ns);
}

std::string sync_text(const NodeInfo& n) {
  if (n.sync_source == "unknown") return "unknown";
  std::string s = n.sync_source + " " +
                  (n.synchronised ? error_bound_text(n.sync_bound_ns, false) : "not synchronised");
  s += fmt::format(" (offset {}{}", n.sync_offset_ns < 0 ? '-' : '+',
                   duration_text(static_cast<uint64_t>(std::llabs(n.sync_offset_ns))));
  if (!n.sync_reference.empty()) s += ", " + n.sync_reference;
  return s + ")";
}

std::string utc_text(uint64_t realtime_ns) {
  time_t secs = static_cast<time_t>(realtime_ns / 1000000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:09d}Z", buf, realtime_ns % 1000000000);
}

nlohmann::json nodes_json(const Trace& trace) {
  nlohmann::json out = nlohmann::json::array();
  for (const NodeInfo& n : trace.nodes()) {
    nlohmann::json pids = nlohmann::json::array();
    for (uint32_t i = n.first_process; i < n.first_process + n.process_count; ++i) {
      if (i < trace.processes().size()) pids.push_back(trace.processes()[i].pid);
    }
    nlohmann::json node = {{"index", n.index},
                           {"hostname", utf8::valid(n.hostname)},
                           {"machine_id", utf8::valid(n.machine_id)},
                           {"boot_id", utf8::valid(n.boot_id)},
                           {"pids", pids},
                           {"alignment", n.alignment},
                           {"error_bound_ns", error_bound_json(n.error_bound_ns)},
                           {"clock_sync",
                            {{"source", n.sync_source},
                             {"synchronised", n.synchronised},
                             {"offset_ns", n.sync_offset_ns},
                             {"root_delay_ns", n.sync_root_delay_ns},
                             {"root_dispersion_ns", n.sync_root_dispersion_ns},
                             {"bound_ns", error_bound_json(n.sync_bound_ns)},
                             {"reference", utf8::valid(n.sync_reference)}}},
                           {"clock_pairs", n.clock_pairs.size()}};
    if (n.has_origin) {
      node["origin"] = {{"pid", n.origin_pid},
                        {"tid", n.origin_tid},
                        {"slot", n.origin_slot},
                        {"seq", n.origin_seq},
                        {"event", utf8::valid(n.origin_event)},
                        {"time_ns", trace.ticks_to_ns(n.origin_ticks)},
                        {"realtime_ns", trace.ticks_to_realtime_ns(n.origin_ticks)}};
    }
    out.push_back(std::move(node));
  }
  return out;
}

nlohmann::json origin_json(const Trace& trace) {
  const NodeInfo* n = first_origin(trace);
  if (n == nullptr) return nullptr;
  return {{"node", n->index},
          {"hostname", utf8::valid(n->hostname)},
          {"pid", n->origin_pid},
          {"tid", n->origin_tid},
          {"seq", n->origin_seq},
          {"event", utf8::valid(n->origin_event)},
          {"time_ns", trace.ticks_to_ns(n->origin_ticks)},
          {"realtime_ns", trace.ticks_to_realtime_ns(n->origin_ticks)}};
}

void print_nodes(const Trace& trace) {
  if (trace.nodes().empty()) return;
  fmt::print("\n{:<5} {:<24} {:>9} {:<13} {:<14} {}\n", "NODE", "HOST", "PROCESSES", "ALIGNMENT",
             "ERROR BOUND", "CLOCK SYNC");
  for (const NodeInfo& n : trace.nodes()) {
    fmt::print("{:<5} {:<24} {:>9} {:<13} {:<14} {}\n", n.index, utf8::valid(n.hostname),
               n.process_count, n.alignment, error_bound_text(n.error_bound_ns),
               utf8::valid(sync_text(n)));
  }
  if (const NodeInfo* o = first_origin(trace)) {
    fmt::print("origin: node {} ({}), pid {}, thread {}, record {} ({}) at {}\n", o->index,
               utf8::valid(o->hostname), o->origin_pid, o->origin_tid, o->origin_seq,
               utf8::valid(o->origin_event), utc_text(trace.ticks_to_realtime_ns(o->origin_ticks)));
  }
}

}  // namespace nanotrace::cli
