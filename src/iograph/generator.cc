// The shape generators and the shape-name parser used by `iograph gen` and `iograph bench`.
#include "iograph/generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace iograph {

uint64_t SplitMix64::below(uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  for (;;) {
    uint64_t x = next();
    if (x < limit) return x % bound;
  }
}

std::string shape_name(const ShapeSpec& spec) {
  switch (spec.kind) {
    case ShapeKind::kFlat:
      return "flat";
    case ShapeKind::kChain:
      return fmt::format("chain({})", spec.k);
    case ShapeKind::kRope:
      return "rope";
    case ShapeKind::kBraid:
      return fmt::format("braid({})", spec.k);
    case ShapeKind::kTree:
      return "tree";
    case ShapeKind::kRtree:
      return "rtree";
    case ShapeKind::kForkJoin:
      return "forkjoin";
    case ShapeKind::kGraph:
      return fmt::format("graph({},{})", spec.m, spec.window);
  }
  return "?";
}

std::vector<std::string> split_shape_list(std::string_view text) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(current);
      current.clear();
    } else if (c != ' ') {
      current += c;
    }
  }
  if (!current.empty()) out.push_back(current);
  return out;
}

namespace {

Status parse_positive(std::string_view text, std::string_view shape, uint32_t& out) {
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0) {
    return Status::Invalid(
        fmt::format("shape '{}': argument '{}' is not a positive integer", shape, text));
  }
  out = value;
  return Status::Ok();
}

// A shape's parameters in positional order; named arguments must use these names.
using ShapeParams = std::vector<std::pair<std::string_view, uint32_t*>>;

// Sets spec's kind and default parameters for a shape name, and where its parameters go.
// False for an unknown name.
bool shape_defaults(std::string_view name, ShapeSpec* spec, ShapeParams* params) {
  if (name == "flat") {
    spec->kind = ShapeKind::kFlat;
  } else if (name == "chain") {
    spec->kind = ShapeKind::kChain;
    spec->k = 8;
    *params = {{"k", &spec->k}};
  } else if (name == "rope") {
    spec->kind = ShapeKind::kRope;
    spec->k = 1;
  } else if (name == "braid") {
    spec->kind = ShapeKind::kBraid;
    spec->k = 4;
    *params = {{"k", &spec->k}};
  } else if (name == "tree") {
    spec->kind = ShapeKind::kTree;
  } else if (name == "rtree") {
    spec->kind = ShapeKind::kRtree;
  } else if (name == "forkjoin") {
    spec->kind = ShapeKind::kForkJoin;
  } else if (name == "graph") {
    spec->kind = ShapeKind::kGraph;
    *params = {{"m", &spec->m}, {"window", &spec->window}};
  } else {
    return false;
  }
  return true;
}

// Stores the arguments of shape text ("3", "k=3", "2,window=16") into their parameters.
Status parse_shape_args(std::string_view text, std::string_view args, const ShapeParams& params) {
  size_t position = 0;
  for (const std::string& arg : split_shape_list(args)) {
    std::string_view a = arg;
    uint32_t* target = nullptr;
    if (auto eq = a.find('='); eq != std::string_view::npos) {
      std::string_view key = a.substr(0, eq);
      for (auto& [pname, ptr] : params) {
        if (pname == key) target = ptr;
      }
      if (!target) {
        return Status::Invalid(fmt::format("shape '{}': unknown parameter '{}'", text, key));
      }
      a = a.substr(eq + 1);
    } else {
      if (position >= params.size()) {
        return Status::Invalid(fmt::format("shape '{}': too many arguments", text));
      }
      target = params[position].second;
    }
    ++position;
    if (Status s = parse_positive(a, text, *target); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Result<ShapeSpec> parse_shape(std::string_view text) {
  std::string_view name = text;
  std::string_view args;
  if (auto open = text.find('('); open != std::string_view::npos) {
    if (text.back() != ')') {
      return Status::Invalid(fmt::format("shape '{}': missing ')'", text));
    }
    name = text.substr(0, open);
    args = text.substr(open + 1, text.size() - open - 2);
  }
  ShapeSpec spec;
  ShapeParams params;
  if (!shape_defaults(name, &spec, &params)) {
    return Status::Invalid(fmt::format(
        "unknown shape '{}' (expected flat, chain(k), rope, braid(k), tree, rtree, forkjoin, "
        "graph(m,window))",
        text));
  }
  if (args.empty()) return spec;
  if (Status s = parse_shape_args(text, args, params); !s.ok()) return s;
  return spec;
}

namespace {

Status check_shape_fits(const ShapeSpec& spec, const GenOptions& options) {
  const uint32_t n = options.nodes;
  if (n == 0) return Status::Invalid("a graph needs at least one node");
  if (options.block_size == 0) return Status::Invalid("block size must be positive");
  if ((spec.kind == ShapeKind::kChain || spec.kind == ShapeKind::kBraid) && spec.k > n) {
    return Status::Invalid(
        fmt::format("shape {}: {} strands do not fit in {} nodes", shape_name(spec), spec.k, n));
  }
  if (spec.kind == ShapeKind::kForkJoin && n < 2) {
    return Status::Invalid("shape forkjoin needs at least 2 nodes");
  }
  return Status::Ok();
}

// The nodes, without edges: one buffer each, at consecutive or random blocks.
void add_nodes(Graph& graph, const GenOptions& options) {
  const uint32_t n = options.nodes;
  const uint64_t span = options.span_bytes ? options.span_bytes : uint64_t{n} * options.block_size;
  const uint64_t span_blocks = std::max<uint64_t>(1, span / options.block_size);
  // Offsets draw from their own stream so graph() edges do not depend on random_offsets.
  SplitMix64 offset_rng(options.seed ^ 0x6f66667365747321ULL);
  for (uint32_t i = 0; i < n; ++i) {
    Node node;
    node.op = options.op;
    node.buffer = i;
    const bool has_data = options.op == OpKind::kRead || options.op == OpKind::kWrite;
    node.length = has_data ? options.block_size : 0;
    uint64_t block = options.random_offsets ? offset_rng.below(span_blocks) : i;
    node.offset = has_data ? block * options.block_size : 0;
    graph.add_node(node);
  }
}

// k chains of consecutive ids, as long as one another (the first n % k one node longer).
Status add_chains(Graph& graph, uint32_t n, uint32_t k) {
  const uint32_t base = n / k, extra = n % k;
  uint32_t start = 0;
  for (uint32_t s = 0; s < k; ++s) {
    const uint32_t len = base + (s < extra ? 1 : 0);
    for (uint32_t j = 1; j < len; ++j) {
      if (Status st = graph.add_edge(start + j - 1, start + j); !st.ok()) return st;
    }
    start += len;
  }
  return Status::Ok();
}

// k strands in rows of k: each node depends on the one above it and on the one above and
// to the right (wrapping).
Status add_braid(Graph& graph, uint32_t n, uint32_t k) {
  for (uint32_t id = k; id < n; ++id) {
    const uint32_t s = id % k, j = id / k;
    const uint32_t same = (j - 1) * k + s, next = (j - 1) * k + (s + 1) % k;
    if (Status st = graph.add_edge(same, id); !st.ok()) return st;
    if (next != same) {
      if (Status st = graph.add_edge(next, id); !st.ok()) return st;
    }
  }
  return Status::Ok();
}

// A binary tree from node 0 (tree), or its mirror, into node n - 1 (rtree).
Status add_tree(Graph& graph, uint32_t n, bool mirrored) {
  if (!mirrored) {
    for (uint32_t i = 1; i < n; ++i) {
      if (Status st = graph.add_edge((i - 1) / 2, i); !st.ok()) return st;
    }
    return Status::Ok();
  }
  // Mirror of tree: tree edge p->c becomes (N-1-c) -> (N-1-p), ids stay topological.
  for (uint32_t c = n - 1; c >= 1; --c) {
    if (Status st = graph.add_edge(n - 1 - c, n - 1 - (c - 1) / 2); !st.ok()) return st;
  }
  return Status::Ok();
}

// Node 0 forks to every middle node, which all join into node n - 1.
Status add_fork_join(Graph& graph, uint32_t n) {
  if (n == 2) return graph.add_edge(0, 1);
  for (uint32_t i = 1; i + 1 < n; ++i) {
    if (Status st = graph.add_edge(0, i); !st.ok()) return st;
    if (Status st = graph.add_edge(i, n - 1); !st.ok()) return st;
  }
  return Status::Ok();
}

// graph(m, window): each node depends on m distinct nodes drawn from the `window` before it.
Status add_random_dag(Graph& graph, uint32_t n, const ShapeSpec& spec, SplitMix64& rng) {
  std::vector<uint32_t> picked;
  for (uint32_t j = 1; j < n; ++j) {
    const uint32_t lo = j > spec.window ? j - spec.window : 0;
    const uint32_t candidates = j - lo;
    const uint32_t want = std::min(spec.m, candidates);
    picked.clear();
    while (picked.size() < want) {
      uint32_t p = lo + static_cast<uint32_t>(rng.below(candidates));
      if (std::find(picked.begin(), picked.end(), p) == picked.end()) picked.push_back(p);
    }
    std::sort(picked.begin(), picked.end());
    for (uint32_t p : picked) {
      if (Status st = graph.add_edge(p, j); !st.ok()) return st;
    }
  }
  return Status::Ok();
}

Status add_edges(Graph& graph, const ShapeSpec& spec, uint32_t n, SplitMix64& rng) {
  switch (spec.kind) {
    case ShapeKind::kFlat:
      return Status::Ok();
    case ShapeKind::kChain:
      return add_chains(graph, n, spec.k);
    case ShapeKind::kRope:
      return add_chains(graph, n, 1);
    case ShapeKind::kBraid:
      return add_braid(graph, n, spec.k);
    case ShapeKind::kTree:
      return add_tree(graph, n, /*mirrored=*/false);
    case ShapeKind::kRtree:
      return add_tree(graph, n, /*mirrored=*/true);
    case ShapeKind::kForkJoin:
      return add_fork_join(graph, n);
    case ShapeKind::kGraph:
      return add_random_dag(graph, n, spec, rng);
  }
  return Status::Ok();
}

}  // namespace

Result<Graph> generate(const ShapeSpec& spec, const GenOptions& options) {
  if (Status s = check_shape_fits(spec, options); !s.ok()) return s;
  Graph graph;
  graph.description = fmt::format("{} nodes={} block_size={} seed={}", shape_name(spec),
                                  options.nodes, options.block_size, options.seed);
  SplitMix64 rng(options.seed);
  add_nodes(graph, options);
  if (Status s = add_edges(graph, spec, options.nodes, rng); !s.ok()) return s;
  if (Status s = graph.finalize(); !s.ok()) return s;
  return graph;
}

}  // namespace iograph
