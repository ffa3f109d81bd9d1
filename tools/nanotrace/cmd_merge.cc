// `nanotrace merge SNAP... -o FILE`: several nodes' snapshots into one multi-node trace file,
// with each node's alignment and error bound, and the trigger that froze them.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/utf8.hpp"
#include "commands.hpp"
#include "nanotrace/merge.hpp"
#include "node_output.hpp"

namespace nanotrace::cli {
namespace {

void print_json(const MergeSummary& m, const std::string& output) {
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const MergedNode& n = m.nodes[i];
    nodes.push_back({{"index", i},
                     {"hostname", utf8::valid(n.hostname)},
                     {"source", utf8::valid(n.source)},
                     {"processes", n.processes},
                     {"data_bytes", n.data_bytes},
                     {"alignment", n.alignment},
                     {"error_bound_ns", error_bound_json(n.error_bound_ns)},
                     {"pair_error_ns", n.pair_error_ns},
                     {"sync_source", n.sync_source},
                     {"sync_bound_ns", error_bound_json(n.sync_bound_ns)}});
  }
  nlohmann::json origin = nullptr;
  if (m.origin.found) {
    origin = {{"node", m.origin.node},
              {"hostname", utf8::valid(m.origin.hostname)},
              {"pid", m.origin.pid},
              {"tid", m.origin.tid},
              {"seq", m.origin.seq},
              {"event", utf8::valid(m.origin.event)},
              {"realtime_ns", m.origin.realtime_ns}};
  }
  nlohmann::json notes = nlohmann::json::array();
  for (const std::string& s : m.notes) notes.push_back(utf8::valid(s));
  nlohmann::json out = {{"output", utf8::valid(output)},
                        {"nodes", nodes},
                        {"origin", origin},
                        {"file_bytes", m.file_bytes},
                        {"data_bytes", m.data_bytes},
                        {"records", m.records},
                        {"seconds", m.seconds},
                        {"notes", notes}};
  fmt::print("{}\n", dump_json(out));
}

void print_text(const MergeSummary& m, const std::string& output) {
  uint32_t processes = 0;
  for (const MergedNode& n : m.nodes) processes += n.processes;
  fmt::print("merged {} nodes ({} processes, {:.1f} MB of ring data) into {} in {:.2f} s\n",
             m.nodes.size(), processes, static_cast<double>(m.data_bytes) / 1e6,
             utf8::valid(output), m.seconds);
  fmt::print("{:<5} {:<24} {:>9} {:<13} {:<30} {:<10} {}\n", "NODE", "HOST", "PROCESSES",
             "ALIGNMENT", "ERROR BOUND", "SYNC", "SOURCE");
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const MergedNode& n = m.nodes[i];
    std::string bound = error_bound_text(n.error_bound_ns);
    if (n.alignment == "reference") {
      bound = "reference";
    } else if (n.alignment == "realtime") {
      bound += " (pairs " + error_bound_text(n.pair_error_ns, false) + ")";
    }
    fmt::print("{:<5} {:<24} {:>9} {:<13} {:<30} {:<10} {}\n", i, utf8::valid(n.hostname),
               n.processes, n.alignment, bound, n.sync_source, utf8::valid(n.source));
  }
  if (m.origin.found) {
    fmt::print("origin: node {} ({}), pid {}, thread {}, record {} ({}) at {}\n", m.origin.node,
               utf8::valid(m.origin.hostname), m.origin.pid, m.origin.tid, m.origin.seq,
               utf8::valid(m.origin.event), utc_text(m.origin.realtime_ns));
  } else {
    fmt::print("origin: none (no trigger fired in these files)\n");
  }
  for (const std::string& note : m.notes) fmt::print("note: {}\n", utf8::valid(note));
}

}  // namespace

int cmd_merge(const std::vector<std::string>& inputs, const std::string& output, bool json) {
  auto merged = merge_traces(inputs, output);
  if (!merged.ok()) return fail(merged.status());
  if (json) {
    print_json(*merged, output);
  } else {
    print_text(*merged, output);
  }
  return 0;
}

}  // namespace nanotrace::cli
