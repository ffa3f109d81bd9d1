// Pids and names the exports show the processes of a merged trace under (node_groups.hpp).
#include "export/node_groups.hpp"

#include <set>

namespace nanotrace::exporter {

ProcessLabels process_labels(const Trace& trace) {
  constexpr uint32_t kPidSpace = 1u << 22;  // the kernel's largest pid_max
  ProcessLabels labels;
  labels.multi_node = trace.nodes().size() > 1;
  std::set<uint32_t> shown;
  std::vector<std::set<uint32_t>> by_node(trace.nodes().size());
  for (const ProcessInfo& p : trace.processes()) {
    std::string name = p.user_name.empty() ? p.process_name : p.user_name;
    uint32_t pid = p.pid;
    if (labels.multi_node && p.node < trace.nodes().size()) {
      name = trace.nodes()[p.node].hostname + ": " + name;
      // Taken by another node's process (a node's own processes keep their pids as they are).
      const bool other_node = shown.count(pid) != 0 && by_node[p.node].count(pid) == 0;
      if (other_node && p.node < (0x7fffffffu / kPidSpace)) pid = p.node * kPidSpace + p.pid;
      by_node[p.node].insert(p.pid);
    }
    shown.insert(pid);
    labels.pids.push_back(pid);
    labels.names.push_back(std::move(name));
  }
  return labels;
}

}  // namespace nanotrace::exporter
