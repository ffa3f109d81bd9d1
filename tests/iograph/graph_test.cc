// Graph validation, the shape generators (structure and determinism) and JSON round trips.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "iograph/generator.hpp"
#include "iograph/json_io.hpp"

namespace iograph {
namespace {

Graph make(std::string_view shape, uint32_t nodes = 128, uint64_t seed = 1) {
  Result<ShapeSpec> spec = parse_shape(shape);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  GenOptions options;
  options.nodes = nodes;
  options.seed = seed;
  Result<Graph> graph = generate(*spec, options);
  EXPECT_TRUE(graph.ok()) << graph.status().message();
  return std::move(graph).value();
}

TEST(GraphTest, RejectsBadEdgesWithClearMessages) {
  Graph g;
  g.add_node({});
  g.add_node({});
  Status s = g.add_edge(0, 5);
  EXPECT_EQ(s.code(), nanotrace::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad edge 0 -> 5: node 5 does not exist (2 nodes)");
  s = g.add_edge(1, 1);
  EXPECT_EQ(s.message(), "bad edge 1 -> 1: self-loop");
  ASSERT_TRUE(g.add_edge(0, 1).ok());
  s = g.add_edge(0, 1);
  EXPECT_EQ(s.message(), "bad edge 0 -> 1: duplicate edge");
  EXPECT_TRUE(g.finalize().ok());
}

TEST(GraphTest, DetectsCycleAndNamesIt) {
  Graph g;
  for (int i = 0; i < 4; ++i) g.add_node({});
  ASSERT_TRUE(g.add_edge(0, 1).ok());
  ASSERT_TRUE(g.add_edge(1, 2).ok());
  ASSERT_TRUE(g.add_edge(2, 3).ok());
  ASSERT_TRUE(g.add_edge(3, 1).ok());
  Status s = g.finalize();
  EXPECT_EQ(s.code(), nanotrace::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cycle: 1 -> 2 -> 3 -> 1");
  EXPECT_FALSE(g.finalized());
}

// What an executor sizes from the nodes must not wrap: buffer slot UINT32_MAX would make
// buffer_slots() 0 (an empty pool, written at slot 4294967295), and an end beyond 2^64 a
// small extent().
TEST(GraphTest, RefusesNodesWhoseSizesWrap) {
  Graph slots;
  slots.add_node({OpKind::kRead, 0, 0, 4096, UINT32_MAX});
  EXPECT_EQ(slots.finalize().message(),
            "node 0: buffer slot 4294967295 is out of range (at most 4294967294)");
  Graph ends;
  ends.add_node({});
  ends.add_node({OpKind::kWrite, 0, UINT64_MAX - 4095, 4096, 0});
  EXPECT_EQ(ends.finalize().message(),
            "node 1: offset 18446744073709547520 + length 4096 is beyond 2^64 bytes");
  Graph edge;
  edge.add_node({OpKind::kWrite, 0, UINT64_MAX - 4096, 4096, UINT32_MAX - 1});
  ASSERT_TRUE(edge.finalize().ok());
  EXPECT_EQ(edge.buffer_slots(), UINT32_MAX);
  EXPECT_EQ(edge.extent(), UINT64_MAX);
}

TEST(GeneratorTest, ShapesHaveTheirDefinedStructure) {
  struct Expect {
    const char* shape;
    size_t edges;
    uint32_t width, critical;
  };
  // tree: heap order, 128 nodes -> 127 edges, 8 levels, widest level 64.
  const Expect cases[] = {
      {"flat", 0, 128, 1},       {"chain(8)", 120, 8, 16}, {"rope", 127, 1, 128},
      {"braid(4)", 248, 4, 32},  {"tree", 127, 64, 8},     {"rtree", 127, 64, 8},
      {"forkjoin", 252, 126, 3},
  };
  for (const Expect& e : cases) {
    Graph g = make(e.shape);
    EXPECT_EQ(g.size(), 128u) << e.shape;
    EXPECT_EQ(g.edges().size(), e.edges) << e.shape;
    EXPECT_EQ(g.width(), e.width) << e.shape;
    EXPECT_EQ(g.critical_path(), e.critical) << e.shape;
  }
}

TEST(GeneratorTest, DefinitionsHoldEdgeByEdge) {
  Graph braid = make("braid(4)");
  for (uint32_t id = 4; id < 128; ++id) {
    auto preds = braid.predecessors(id);
    const uint32_t s = id % 4, j = id / 4;
    ASSERT_EQ(preds.size(), 2u);
    EXPECT_EQ(preds[0], std::min((j - 1) * 4 + s, (j - 1) * 4 + (s + 1) % 4));
    EXPECT_EQ(preds[1], std::max((j - 1) * 4 + s, (j - 1) * 4 + (s + 1) % 4));
  }
  Graph tree = make("tree");
  for (uint32_t i = 1; i < 128; ++i) {
    ASSERT_EQ(tree.predecessors(i).size(), 1u);
    EXPECT_EQ(tree.predecessors(i)[0], (i - 1) / 2);
  }
  Graph rtree = make("rtree");
  EXPECT_EQ(rtree.predecessors(127).size(), 2u);  // the root waits for both children
  EXPECT_EQ(rtree.successors(127).size(), 0u);
  Graph chain = make("chain(8)");
  for (uint32_t id = 0; id < 128; ++id) {
    EXPECT_EQ(chain.predecessors(id).size(), id % 16 == 0 ? 0u : 1u);
  }
  Graph g = make("graph(2,16)", 128, 7);
  for (uint32_t j = 0; j < 128; ++j) {
    auto preds = g.predecessors(j);
    EXPECT_EQ(preds.size(), std::min<size_t>(j, 2));
    for (uint32_t p : preds) {
      EXPECT_LT(p, j);
      EXPECT_GE(p + 16, j);
    }
  }
  for (uint32_t i = 0; i < 128; ++i) EXPECT_EQ(g.node(i).offset, uint64_t{i} * 4096);
}

TEST(GeneratorTest, SameSeedSameGraphOtherSeedOtherGraph) {
  EXPECT_EQ(graph_to_json(make("graph(2,16)", 128, 42)),
            graph_to_json(make("graph(2,16)", 128, 42)));
  EXPECT_NE(make("graph(2,16)", 128, 42).edges(), make("graph(2,16)", 128, 43).edges());
  GenOptions options;
  options.random_offsets = true;
  options.span_bytes = 64 << 20;
  options.seed = 9;
  Result<Graph> a = generate(ShapeSpec{}, options), b = generate(ShapeSpec{}, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(graph_to_json(*a), graph_to_json(*b));
  for (const Node& n : a->nodes()) {
    EXPECT_EQ(n.offset % 4096, 0u);
    EXPECT_LT(n.offset, uint64_t{64} << 20);
  }
}

TEST(GeneratorTest, ParsesShapeNamesAndRejectsBadOnes) {
  Result<ShapeSpec> s = parse_shape("graph(m=3,window=8)");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->m, 3u);
  EXPECT_EQ(s->window, 8u);
  EXPECT_EQ(shape_name(parse_shape("chain").value()), "chain(8)");
  EXPECT_EQ(parse_shape("spiral").status().code(), nanotrace::StatusCode::kInvalidArgument);
  EXPECT_FALSE(parse_shape("chain(0)").ok());
  EXPECT_FALSE(parse_shape("chain(x)").ok());
  EXPECT_FALSE(parse_shape("graph(1,2,3)").ok());
  EXPECT_EQ(split_shape_list("flat,graph(2,16),chain(8)"),
            (std::vector<std::string>{"flat", "graph(2,16)", "chain(8)"}));
  GenOptions options;
  options.nodes = 4;
  EXPECT_FALSE(generate(parse_shape("chain(8)").value(), options).ok());
}

TEST(JsonTest, RoundTripKeepsEverything) {
  for (const char* shape : {"flat", "braid(4)", "graph(2,16)", "rtree"}) {
    Graph g = make(shape, 50, 3);
    const std::string path = ::testing::TempDir() + "/iograph_roundtrip.json";
    ASSERT_TRUE(save_graph(g, path).ok());
    Result<Graph> back = load_graph(path);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->edges(), g.edges());
    ASSERT_EQ(back->size(), g.size());
    for (uint32_t i = 0; i < g.size(); ++i) {
      EXPECT_EQ(back->node(i).offset, g.node(i).offset);
      EXPECT_EQ(back->node(i).length, g.node(i).length);
      EXPECT_EQ(back->node(i).op, g.node(i).op);
      EXPECT_EQ(back->node(i).buffer, g.node(i).buffer);
    }
    EXPECT_EQ(back->description, g.description);
    EXPECT_EQ(back->width(), g.width());
    EXPECT_EQ(graph_to_json(*back), graph_to_json(g));
  }
}

TEST(JsonTest, MalformedInputGivesErrorsNotCrashes) {
  EXPECT_EQ(graph_from_json("{").status().code(), nanotrace::StatusCode::kCorrupt);
  EXPECT_EQ(graph_from_json("[]").status().code(), nanotrace::StatusCode::kCorrupt);
  const std::string head = R"({"format":"iograph","version":1,)";
  EXPECT_FALSE(graph_from_json(head + R"("nodes":[{"op":"jump"}]})").ok());
  EXPECT_FALSE(graph_from_json(head + R"("nodes":[{"op":"read","length":-1}]})").ok());
  Result<Graph> cyc =
      graph_from_json(head + R"("nodes":[{"op":"nop"},{"op":"nop"}],"edges":[[0,1],[1,0]]})");
  EXPECT_EQ(cyc.status().message(), "cycle: 0 -> 1 -> 0");
  Result<Graph> bad = graph_from_json(head + R"("nodes":[{"op":"nop"}],"edges":[[0,3]]})");
  EXPECT_EQ(bad.status().message(), "bad edge 0 -> 3: node 3 does not exist (1 nodes)");
  EXPECT_EQ(load_graph("/nonexistent/g.json").status().code(), nanotrace::StatusCode::kNotFound);
}

}  // namespace
}  // namespace iograph
