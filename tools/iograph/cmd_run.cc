// `iograph run`: executes one graph on one backend and target and prints, per node, its
// state, result and submit/complete times (a text table, or JSON with --json).
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "iograph/executor.hpp"
#include "iograph/json_io.hpp"

namespace iograph::cli {
namespace {

const char* state_name(NodeState state) {
  switch (state) {
    case NodeState::kOk:
      return "ok";
    case NodeState::kFailed:
      return "failed";
    case NodeState::kSkipped:
      return "skipped";
    default:
      return "pending";
  }
}

struct RunArgs {
  std::string graph_path;
  std::string backend = "uring-ready";
  std::string target = "nop";
  std::vector<uint32_t> fail_nodes;
  bool json = false;
  ExecOptions exec;
};

void print_result_json(const RunArgs& args, const Graph& graph, const Target& target,
                       const RunResult& result) {
  nlohmann::json doc;
  doc["backend"] = args.backend;
  doc["target"] = target.describe();
  doc["elapsed_us"] = static_cast<double>(result.elapsed_ns) / 1e3;
  doc["enter_calls"] = result.enter_calls;
  doc["ok"] = result.ok_count;
  doc["failed"] = result.failed;
  doc["skipped"] = result.skipped;
  nlohmann::json nodes = nlohmann::json::array();
  for (uint32_t i = 0; i < graph.size(); ++i) {
    const NodeRecord& r = result.nodes[i];
    nodes.push_back({{"id", i},
                     {"state", state_name(r.state)},
                     {"result", r.result},
                     {"submissions", r.submissions},
                     {"submit_seq", r.submit_seq},
                     {"complete_seq", r.complete_seq},
                     {"linked_after", r.linked_after},
                     {"submit_us", static_cast<double>(r.submit_ns) / 1e3},
                     {"complete_us", static_cast<double>(r.complete_ns) / 1e3}});
  }
  doc["nodes"] = std::move(nodes);
  fmt::print("{}\n", doc.dump(1));
}

void print_result_table(const RunArgs& args, const Graph& graph, const Target& target,
                        const RunResult& result) {
  fmt::print("# {} on {}, {} nodes, width {}, critical path {}\n", args.backend, target.describe(),
             graph.size(), graph.width(), graph.critical_path());
  fmt::print("{:>6} {:>5} {:>12} {:>8} {:>7} {:>8} {:>11} {:>11} {:>9} {:>6}\n", "node", "op",
             "offset", "length", "state", "result", "submit_us", "complete_us", "latency", "subm");
  for (uint32_t i = 0; i < graph.size(); ++i) {
    const NodeRecord& r = result.nodes[i];
    const Node& n = graph.node(i);
    const bool ran = r.complete_seq != 0;
    fmt::print(
        "{:>6} {:>5} {:>12} {:>8} {:>7} {:>8} {:>11.2f} {:>11} {:>9} {:>6}\n", i, op_name(n.op),
        n.offset, n.length, state_name(r.state), r.result, static_cast<double>(r.submit_ns) / 1e3,
        ran ? fmt::format("{:.2f}", static_cast<double>(r.complete_ns) / 1e3) : "-",
        ran ? fmt::format("{:.2f}", static_cast<double>(r.complete_ns - r.submit_ns) / 1e3) : "-",
        r.submissions);
  }
  fmt::print("# elapsed {:.2f} us, {} io_uring_enter calls, ok {}, failed {}, skipped {}\n",
             static_cast<double>(result.elapsed_ns) / 1e3, result.enter_calls, result.ok_count,
             result.failed.size(), result.skipped.size());
}

// Runs the graph; exit status 3 if a node failed or was skipped.
int run_graph(const RunArgs& args) {
  Result<Graph> graph = load_graph(args.graph_path);
  if (!graph.ok()) return fail(graph.status());
  Result<Backend> backend = parse_backend(args.backend);
  if (!backend.ok()) return fail(backend.status());
  Result<std::unique_ptr<Target>> target = open_target(args.target);
  if (!target.ok()) return fail(target.status());
  for (uint32_t node : args.fail_nodes) {
    if (node >= graph->size()) {
      return fail(fmt::format("--fail {}: the graph has {} nodes", node, graph->size()));
    }
    if (Status s = (*target)->inject_failure(node, -EIO); !s.ok()) return fail(s);
  }
  Result<std::unique_ptr<Executor>> executor = make_executor(*backend, **target, args.exec);
  if (!executor.ok()) return fail(executor.status());
  RunResult result;
  if (Status s = (*executor)->run(*graph, result); !s.ok()) return fail(s);
  if (args.json) {
    print_result_json(args, *graph, **target, result);
  } else {
    print_result_table(args, *graph, **target, result);
  }
  return result.failed.empty() && result.skipped.empty() ? 0 : 3;
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  app.add_option("graph", args->graph_path, "Graph JSON written by `iograph gen`")->required();
  app.add_option("--backend", args->backend, "sync, uring-ready, uring-level or uring-link")
      ->capture_default_str();
  app.add_option("--target", args->target, "nop, zero, file:PATH or loop")->capture_default_str();
  app.add_option("--fail", args->fail_nodes,
                 "Node ids that complete with -EIO (nop target only; repeatable)");
  app.add_flag("--json", args->json, "Print the result as JSON");
  add_ring_options(app, args->exec);
  return [args]() -> int { return run_graph(*args); };
}

}  // namespace iograph::cli
