// The sync backend: blocking pread/pwrite/fdatasync in topological order, the baseline every
// io_uring backend is compared with. A node whose predecessor failed is not run.
#include <nanotrace/nanotrace.hpp>

#include "executor_base.hpp"

namespace iograph::internal {
namespace {

class SyncExecutor final : public ExecutorBase {
 public:
  using ExecutorBase::ExecutorBase;

  Status run(const Graph& graph, RunResult& result) override {
    if (Status s = begin(graph, result); !s.ok()) return s;
    const uint64_t gid = graph_id_;
    for (uint32_t id : graph.topological_order()) {
      bool runnable = true;
      for (uint32_t p : graph.predecessors(id)) {
        runnable &= result.nodes[p].state == NodeState::kOk;
      }
      if (!runnable) continue;
      const Node& node = graph.node(id);
      Outcome outcome;
      do {
        record_submit(result, id, now());
        NANOTRACE(iograph, node_submit, "graph={} node={} backend={} op={} offset={}", gid, id,
                  backend_, graph.node(id).op, graph.node(id).offset + done_bytes_[id]);
        const int res = execute_blocking(id, node);
        outcome = complete(result, id, node, res, now());
      } while (outcome == Outcome::kPartial);
      NANOTRACE(iograph, node_complete, "graph={} node={} backend={} result={} lat_us={} state={}",
                gid, id, backend_, result.nodes[id].result,
                in_flight_us(result, id, result.nodes[id].complete_ns), result.nodes[id].state);
    }
    finish(graph, result);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Executor> make_sync_executor(Target& target, const ExecOptions& options) {
  return std::make_unique<SyncExecutor>(Backend::kSync, target, options);
}

}  // namespace iograph::internal
