// libFuzzer target for iograph's graph JSON (iograph/json_io.hpp), which `iograph run` reads
// from any file it is given. graph_from_json must refuse or accept without crashing or
// throwing. An accepted graph is one an executor can run: every buffer slot below
// buffer_slots(), every offset + length within extent() without wrapping, the buffer pool's
// size representable; its topological order is a permutation that respects every edge and its
// levels are one more than the deepest predecessor's. Written back out, it reads in again to
// the same document.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "iograph/graph.hpp"
#include "iograph/json_io.hpp"

namespace {

#define FUZZ_CHECK(cond)                                                 \
  do {                                                                   \
    if (!(cond)) {                                                       \
      __builtin_printf("check failed: %s (line %d)\n", #cond, __LINE__); \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

void check_graph(const iograph::Graph& g) {
  FUZZ_CHECK(g.finalized());
  const uint32_t n = g.size();
  uint64_t extent = 0;
  for (uint32_t v = 0; v < n; ++v) {
    const iograph::Node& node = g.node(v);
    FUZZ_CHECK(node.buffer < g.buffer_slots());
    FUZZ_CHECK(node.length <= g.max_length());
    uint64_t end;
    FUZZ_CHECK(!__builtin_add_overflow(node.offset, node.length, &end));
    FUZZ_CHECK(end <= g.extent());
    extent = end > extent ? end : extent;
  }
  FUZZ_CHECK(extent == g.extent());
  // What an executor allocates: buffer_slots() slots of max_length() rounded up to pages.
  const uint64_t slot = (uint64_t{g.max_length() > 0 ? g.max_length() : 1} + 4095) & ~4095ull;
  uint64_t pool;
  FUZZ_CHECK(!__builtin_mul_overflow(slot, uint64_t{g.buffer_slots()}, &pool));

  const std::vector<uint32_t>& order = g.topological_order();
  FUZZ_CHECK(order.size() == n);
  std::vector<uint32_t> position(n, UINT32_MAX);
  for (uint32_t i = 0; i < n; ++i) {
    FUZZ_CHECK(order[i] < n && position[order[i]] == UINT32_MAX);
    position[order[i]] = i;
  }
  for (const auto& [from, to] : g.edges()) {
    FUZZ_CHECK(from < n && to < n && position[from] < position[to]);
    FUZZ_CHECK(g.level(to) > g.level(from));
  }
  uint32_t on_levels = 0;
  for (uint32_t l = 0; l < g.level_count(); ++l) {
    FUZZ_CHECK(g.level_nodes(l).size() <= g.width());
    for (uint32_t v : g.level_nodes(l)) FUZZ_CHECK(v < n && g.level(v) == l);
    on_levels += static_cast<uint32_t>(g.level_nodes(l).size());
  }
  FUZZ_CHECK(on_levels == n);
  for (uint32_t v = 0; v < n; ++v) {
    uint32_t level = 0;
    for (uint32_t u : g.predecessors(v)) level = std::max(level, g.level(u) + 1);
    FUZZ_CHECK(level == g.level(v));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // No exception may leave the library: one escaping here fails the run (libFuzzer reports
  // an uncaught exception as a crash).
  auto graph =
      iograph::graph_from_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!graph.ok()) {
    FUZZ_CHECK(!graph.status().message().empty());
    return 0;
  }
  check_graph(*graph);
  const std::string text = iograph::graph_to_json(*graph);
  auto again = iograph::graph_from_json(text);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(iograph::graph_to_json(*again) == text);
  return 0;
}
