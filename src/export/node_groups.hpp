// How the exports show the nodes of a merged trace (`nanotrace merge`): one group of processes
// per node. Each process gets the pid it is shown under (its own, unless a process of an
// earlier node has it: pids of several machines, or of containers, collide) and a name that
// carries its node's hostname. Internal header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::exporter {

struct ProcessLabels {
  std::vector<uint32_t> pids;      // by process index: the pid to show
  std::vector<std::string> names;  // by process index: "name", or "host: name" with nodes
  bool multi_node = false;
  // The pid of thread t (its process's shown pid).
  uint32_t pid_of(const ThreadInfo& t) const {
    return t.process < pids.size() ? pids[t.process] : t.pid;
  }
};

// A pid above pid_max (at most 2^22), node * 2^22 + pid, stands for a pid already shown.
ProcessLabels process_labels(const Trace& trace);

}  // namespace nanotrace::exporter
