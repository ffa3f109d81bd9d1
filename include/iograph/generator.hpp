// iograph: deterministic generators for the benchmark shapes. Nodes are numbered 0..N-1 in a
// topological order; an edge u->v means v is issued after u succeeded. Node i performs `op`
// on `block_size` bytes at offset i*block_size (or, with random_offsets, at a seeded random
// block-aligned offset below span_bytes), through buffer slot i. Exact shape definitions
// (k strands of a chain, braid rows, tree numbering, graph() sampling) are in
// docs/iograph.md and next to each Shape below.
//
// Thread safety: all functions are pure; any thread may call them concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "iograph/graph.hpp"

namespace iograph {

enum class ShapeKind : uint8_t {
  kFlat,      // no edges
  kChain,     // k strands; strand s holds ids [s*L, s*L+L) (first N mod k strands one longer)
  kRope,      // chain with k = 1: one strand, critical path N
  kBraid,     // id = j*k+s; (s,j) depends on (s,j-1) and ((s+1) mod k, j-1)
  kTree,      // out-tree in heap order: node i>0 depends on (i-1)/2
  kRtree,     // in-tree: the tree mirrored, node N-1 is the root and waits for its children
  kForkJoin,  // 0 -> {1..N-2} -> N-1
  kGraph,     // random DAG: node j takes min(j,m,W) distinct predecessors in [max(0,j-W), j-1]
};

struct ShapeSpec {
  ShapeKind kind = ShapeKind::kFlat;
  uint32_t k = 8;        // strands for chain (default 8) and braid (default 4)
  uint32_t m = 2;        // predecessors per node for graph
  uint32_t window = 16;  // window for graph
};

// Canonical text of a spec: "flat", "chain(8)", "rope", "braid(4)", "tree", "rtree",
// "forkjoin", "graph(2,16)".
std::string shape_name(const ShapeSpec& spec);

// parse_shape: parses a canonical name; chain, braid and graph accept their arguments
// positionally or named ("graph(m=2,window=16)"), and default them when omitted.
// Errors: kInvalidArgument for an unknown shape or a bad or zero argument.
Result<ShapeSpec> parse_shape(std::string_view text);

// split_shape_list: splits "flat,chain(8),graph(2,16)" at commas outside parentheses.
std::vector<std::string> split_shape_list(std::string_view text);

struct GenOptions {
  uint32_t nodes = 128;
  uint32_t block_size = 4096;
  uint64_t seed = 1;
  OpKind op = OpKind::kRead;
  bool random_offsets = false;
  uint64_t span_bytes = 0;  // random offsets fall below this; 0 means nodes*block_size
};

// generate: builds and finalizes the graph of `spec` with `options`. The same spec and
// options always give the same graph; the seed matters for graph() and random offsets.
// Errors: kInvalidArgument when nodes is 0, block_size is 0, or k exceeds nodes.
Result<Graph> generate(const ShapeSpec& spec, const GenOptions& options);

// SplitMix64 (Steele, Lea, Flood 2014), the generator's only source of randomness.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) by rejection, so no modulo bias.
  uint64_t below(uint64_t bound);

 private:
  uint64_t state_;
};

}  // namespace iograph
