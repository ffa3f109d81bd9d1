// iograph: a directed acyclic graph of I/O operations. A node is one operation (read, write,
// fsync or nop) on a file slot of a target, at an offset, of a length, through a buffer slot;
// an edge u->v means v may be issued only after u completed successfully. A Graph is built
// with add_node/add_edge and then frozen with finalize(), which rejects cycles and computes
// what the executors and reports need: adjacency, a topological order, levels, width and
// critical path.
//
// Thread safety: a finalized Graph is immutable and may be read from any number of threads;
// building (add_node, add_edge, finalize) needs external synchronisation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/enum.hpp"
#include "nanotrace/status.hpp"

namespace iograph {

using nanotrace::Result;
using nanotrace::Status;

enum class OpKind : uint8_t { kRead, kWrite, kFsync, kNop };
// Traced op fields print these names (nanotrace/enum.hpp); op_name() gives the same.
NANOTRACE_ENUM(OpKind, {OpKind::kRead, "read"}, {OpKind::kWrite, "write"},
               {OpKind::kFsync, "fsync"}, {OpKind::kNop, "nop"});

// "read", "write", "fsync", "nop".
std::string_view op_name(OpKind op);
// Parses an op_name() string. Errors: kInvalidArgument for any other text.
Result<OpKind> parse_op(std::string_view text);

struct Node {
  OpKind op = OpKind::kRead;
  uint32_t file = 0;    // file slot of the target; every current target has one slot, 0
  uint64_t offset = 0;  // bytes
  uint32_t length = 0;  // bytes; 0 for fsync and nop
  uint32_t buffer = 0;  // buffer slot (each slot holds the graph's largest length)
};

class Graph {
 public:
  // add_node: appends a node and returns its id (ids are dense, from 0). Invalidates a
  // previous finalize().
  uint32_t add_node(const Node& node);

  // add_edge: records that `to` depends on `from`.
  // Returns Ok, or kInvalidArgument with a one-line message for an unknown node id, a
  // self-loop or a duplicate edge. Invalidates a previous finalize().
  Status add_edge(uint32_t from, uint32_t to);

  // finalize: builds adjacency, topological order, levels, width and critical path.
  // Returns Ok, or kInvalidArgument naming the nodes of one cycle ("cycle: 3 -> 5 -> 3"), or
  // a node whose buffer slot is UINT32_MAX or whose offset + length is beyond 2^64.
  Status finalize();

  bool finalized() const { return finalized_; }
  uint32_t size() const { return static_cast<uint32_t>(nodes_.size()); }
  const Node& node(uint32_t id) const { return nodes_[id]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // Edges as added, (from, to).
  const std::vector<std::pair<uint32_t, uint32_t>>& edges() const { return edges_; }

  // The following require finalize() to have succeeded.
  std::span<const uint32_t> successors(uint32_t id) const {
    return {succ_.data() + succ_begin_[id], succ_begin_[id + 1] - succ_begin_[id]};
  }
  std::span<const uint32_t> predecessors(uint32_t id) const {
    return {pred_.data() + pred_begin_[id], pred_begin_[id + 1] - pred_begin_[id]};
  }
  // Nodes in a topological order (Kahn's algorithm, lowest id first among ready nodes).
  const std::vector<uint32_t>& topological_order() const { return topo_; }
  // level(v) = 0 for sources, else 1 + max level of its predecessors.
  uint32_t level(uint32_t id) const { return level_[id]; }
  uint32_t level_count() const { return static_cast<uint32_t>(level_begin_.size()) - 1; }
  // Nodes of level l, ascending id.
  std::span<const uint32_t> level_nodes(uint32_t l) const {
    return {by_level_.data() + level_begin_[l], level_begin_[l + 1] - level_begin_[l]};
  }
  // Largest number of nodes on one level.
  uint32_t width() const { return width_; }
  // Nodes on the longest dependency path (= level_count()); 0 for an empty graph.
  uint32_t critical_path() const { return level_count(); }
  // Largest buffer slot + 1 and largest length, what an executor allocates.
  uint32_t buffer_slots() const { return buffer_slots_; }
  uint32_t max_length() const { return max_length_; }
  // Largest offset + length over all nodes.
  uint64_t extent() const { return extent_; }

  // Free text describing how the graph was made ("chain(8) seed=1"), kept in saved JSON.
  std::string description;

 private:
  std::vector<Node> nodes_;
  std::vector<std::pair<uint32_t, uint32_t>> edges_;
  bool finalized_ = false;
  std::vector<uint32_t> succ_begin_, succ_, pred_begin_, pred_;
  std::vector<uint32_t> topo_, level_, level_begin_, by_level_;
  uint32_t width_ = 0, buffer_slots_ = 0, max_length_ = 0;
  uint64_t extent_ = 0;
};

}  // namespace iograph
