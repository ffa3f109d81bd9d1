// Graph construction and validation: edge checks at insertion, cycle detection and the
// derived structure (CSR adjacency, Kahn order, levels, width) computed once by finalize().
#include "iograph/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

namespace iograph {

std::string_view op_name(OpKind op) {
  switch (op) {
    case OpKind::kRead:
      return "read";
    case OpKind::kWrite:
      return "write";
    case OpKind::kFsync:
      return "fsync";
    case OpKind::kNop:
      return "nop";
  }
  return "?";
}

Result<OpKind> parse_op(std::string_view text) {
  for (OpKind op : {OpKind::kRead, OpKind::kWrite, OpKind::kFsync, OpKind::kNop}) {
    if (text == op_name(op)) return op;
  }
  return Status::Invalid(fmt::format("unknown op '{}' (expected read, write, fsync or nop)", text));
}

uint32_t Graph::add_node(const Node& node) {
  finalized_ = false;
  nodes_.push_back(node);
  return static_cast<uint32_t>(nodes_.size() - 1);
}

Status Graph::add_edge(uint32_t from, uint32_t to) {
  finalized_ = false;
  if (from >= nodes_.size() || to >= nodes_.size()) {
    return Status::Invalid(fmt::format("bad edge {} -> {}: node {} does not exist ({} nodes)", from,
                                       to, from >= nodes_.size() ? from : to, nodes_.size()));
  }
  if (from == to) return Status::Invalid(fmt::format("bad edge {} -> {}: self-loop", from, to));
  // Duplicates are found by a linear scan of the (small) out-list of `from` so that building
  // stays allocation-free beyond the edge vector; generators add few edges per node.
  for (auto it = edges_.rbegin(); it != edges_.rend() && it - edges_.rbegin() < 64; ++it) {
    if (it->first == from && it->second == to) {
      return Status::Invalid(fmt::format("bad edge {} -> {}: duplicate edge", from, to));
    }
  }
  edges_.emplace_back(from, to);
  return Status::Ok();
}

namespace {

// Builds CSR arrays (begin offsets of size n+1 and flat targets) keyed by `key(edge)`.
template <class Key, class Value>
void build_csr(uint32_t n, const std::vector<std::pair<uint32_t, uint32_t>>& edges, Key key,
               Value value, std::vector<uint32_t>& begin, std::vector<uint32_t>& flat) {
  begin.assign(n + 1, 0);
  for (const auto& e : edges) ++begin[key(e) + 1];
  for (uint32_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
  flat.assign(edges.size(), 0);
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (const auto& e : edges) flat[fill[key(e)]++] = value(e);
  for (uint32_t i = 0; i < n; ++i) std::sort(flat.begin() + begin[i], flat.begin() + begin[i + 1]);
}

// A cycle among the nodes Kahn's walk could not finish (missing[v]: predecessors of v not
// done), as "a -> b -> ... -> a" from its smallest id: walks predecessors among the
// unfinished nodes until one repeats.
std::string describe_cycle(const std::vector<uint32_t>& missing,
                           const std::vector<uint32_t>& pred_begin,
                           const std::vector<uint32_t>& pred) {
  const uint32_t n = static_cast<uint32_t>(missing.size());
  uint32_t start = 0;
  while (missing[start] == 0) ++start;
  std::vector<int64_t> seen_at(n, -1);
  std::vector<uint32_t> path;
  uint32_t v = start;
  while (seen_at[v] < 0) {
    seen_at[v] = static_cast<int64_t>(path.size());
    path.push_back(v);
    for (uint32_t i = pred_begin[v]; i < pred_begin[v + 1]; ++i) {
      if (missing[pred[i]] != 0) {
        v = pred[i];
        break;
      }
    }
  }
  std::vector<uint32_t> cycle(path.begin() + seen_at[v], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  std::string text;
  for (uint32_t c : cycle) text += fmt::format("{} -> ", c);
  text += fmt::format("{}", cycle.front());
  return text;
}

// The nodes grouped by level: by_level holds level l's nodes at [level_begin[l],
// level_begin[l + 1]). Returns the width (the most nodes on one level).
uint32_t group_by_level(const std::vector<uint32_t>& level, std::vector<uint32_t>* level_begin,
                        std::vector<uint32_t>* by_level) {
  const uint32_t n = static_cast<uint32_t>(level.size());
  uint32_t levels = 0;
  for (uint32_t v = 0; v < n; ++v) levels = std::max(levels, level[v] + 1);
  level_begin->assign(levels + 1, 0);
  for (uint32_t v = 0; v < n; ++v) ++(*level_begin)[level[v] + 1];
  uint32_t width = 0;
  for (uint32_t l = 0; l < levels; ++l) {
    width = std::max(width, (*level_begin)[l + 1]);
    (*level_begin)[l + 1] += (*level_begin)[l];
  }
  by_level->assign(n, 0);
  std::vector<uint32_t> fill(level_begin->begin(), level_begin->end() - 1);
  for (uint32_t v = 0; v < n; ++v) (*by_level)[fill[level[v]]++] = v;
  return width;
}

}  // namespace

Status Graph::finalize() {
  const uint32_t n = size();
  // What an executor sizes from the nodes must be representable: the buffer slot count
  // (largest slot + 1) and each node's end in the file.
  for (uint32_t v = 0; v < n; ++v) {
    const Node& node = nodes_[v];
    if (node.buffer == UINT32_MAX) {
      return Status::Invalid(fmt::format("node {}: buffer slot {} is out of range (at most {})", v,
                                         node.buffer, UINT32_MAX - 1));
    }
    if (node.offset > UINT64_MAX - node.length) {
      return Status::Invalid(fmt::format("node {}: offset {} + length {} is beyond 2^64 bytes", v,
                                         node.offset, node.length));
    }
  }
  // A full duplicate check (add_edge only looks at recent edges).
  std::vector<std::pair<uint32_t, uint32_t>> sorted = edges_;
  std::sort(sorted.begin(), sorted.end());
  auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    return Status::Invalid(
        fmt::format("bad edge {} -> {}: duplicate edge", dup->first, dup->second));
  }
  build_csr(
      n, edges_, [](const auto& e) { return e.first; }, [](const auto& e) { return e.second; },
      succ_begin_, succ_);
  build_csr(
      n, edges_, [](const auto& e) { return e.second; }, [](const auto& e) { return e.first; },
      pred_begin_, pred_);

  // Kahn's walk, smallest ready id first; a node's level is one more than its deepest
  // predecessor's.
  std::vector<uint32_t> missing(n);
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (uint32_t v = 0; v < n; ++v) {
    missing[v] = pred_begin_[v + 1] - pred_begin_[v];
    if (missing[v] == 0) ready.push(v);
  }
  topo_.clear();
  topo_.reserve(n);
  level_.assign(n, 0);
  while (!ready.empty()) {
    uint32_t u = ready.top();
    ready.pop();
    topo_.push_back(u);
    for (uint32_t v : successors(u)) {
      level_[v] = std::max(level_[v], level_[u] + 1);
      if (--missing[v] == 0) ready.push(v);
    }
  }
  if (topo_.size() != n) {
    finalized_ = false;
    return Status::Invalid("cycle: " + describe_cycle(missing, pred_begin_, pred_));
  }
  width_ = group_by_level(level_, &level_begin_, &by_level_);

  buffer_slots_ = 0;
  max_length_ = 0;
  extent_ = 0;
  for (const Node& node : nodes_) {
    buffer_slots_ = std::max(buffer_slots_, node.buffer + 1);
    max_length_ = std::max(max_length_, node.length);
    extent_ = std::max(extent_, node.offset + node.length);
  }
  finalized_ = true;
  return Status::Ok();
}

}  // namespace iograph
