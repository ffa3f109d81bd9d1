// `iograph gen`: writes one generated graph as JSON (to a file or stdout).
#include <fmt/format.h>

#include <cstdio>

#include "cli_common.hpp"
#include "commands.hpp"
#include "iograph/generator.hpp"
#include "iograph/json_io.hpp"

namespace iograph::cli {

Action add_gen_command(CLI::App& app) {
  struct Args {
    std::string shape = "flat";
    GenOptions gen;
    std::string op = "read";
    std::string output;
  };
  auto args = std::make_shared<Args>();
  app.add_option("--shape", args->shape,
                 "flat, chain(k), rope, braid(k), tree, rtree, forkjoin, graph(m,window)")
      ->capture_default_str();
  app.add_option("--nodes,--size", args->gen.nodes, "Number of nodes")
      ->check(CLI::Range(1u, 1u << 24))
      ->capture_default_str();
  app.add_option("--block-size", args->gen.block_size, "Bytes per read or write")
      ->check(CLI::Range(1u, 1u << 30))
      ->capture_default_str();
  app.add_option("--seed", args->gen.seed, "Seed of graph() edges and random offsets")
      ->capture_default_str();
  app.add_option("--op", args->op, "read, write, fsync or nop")->capture_default_str();
  app.add_flag("--random-offsets", args->gen.random_offsets,
               "Block-aligned random offsets below --span instead of i*block-size");
  app.add_option("--span", args->gen.span_bytes,
                 "Bytes random offsets fall below (default "
                 "nodes*block-size)");
  app.add_option("-o,--output", args->output, "Output file (default: stdout)");
  return [args]() -> int {
    Result<ShapeSpec> spec = parse_shape(args->shape);
    if (!spec.ok()) return fail(spec.status());
    Result<OpKind> op = parse_op(args->op);
    if (!op.ok()) return fail(op.status());
    args->gen.op = *op;
    Result<Graph> graph = generate(*spec, args->gen);
    if (!graph.ok()) return fail(graph.status());
    if (args->output.empty()) {
      fmt::print("{}", graph_to_json(*graph));
    } else if (Status s = save_graph(*graph, args->output); !s.ok()) {
      return fail(s);
    }
    fmt::print(stderr, "{}: {} nodes, {} edges, width {}, critical path {}\n", shape_name(*spec),
               graph->size(), graph->edges().size(), graph->width(), graph->critical_path());
    return 0;
  };
}

}  // namespace iograph::cli
