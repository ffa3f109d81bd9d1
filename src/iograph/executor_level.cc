// The uring-level backend: Pavel Begunkov's userspace baseline. Levels run one after the
// other with a barrier between them: all runnable nodes of a level are submitted (queue
// depth permitting) and the level ends only when every one of them has completed.
#include <nanotrace/nanotrace.hpp>

#include "executor_base.hpp"

namespace iograph::internal {
namespace {

class LevelExecutor final : public ExecutorBase {
 public:
  using ExecutorBase::ExecutorBase;

  Status run(const Graph& graph, RunResult& result) override {
    if (Status s = begin(graph, result); !s.ok()) return s;
    const uint64_t gid = graph_id_;
    for (uint32_t level = 0; level < graph.level_count(); ++level) {
      // Nodes of this level whose predecessors all succeeded; others stay pending (skipped).
      queue_.clear();
      for (uint32_t v : graph.level_nodes(level)) {
        bool runnable = true;
        for (uint32_t p : graph.predecessors(v)) {
          runnable &= result.nodes[p].state == NodeState::kOk;
        }
        if (runnable) queue_.push_back(v);
      }
      size_t head = 0;
      uint32_t inflight = 0;
      while (head < queue_.size() || inflight > 0) {
        uint64_t t = now();
        while (head < queue_.size() && inflight < options_.queue_depth) {
          const uint32_t v = queue_[head++];
          io_uring_sqe* sqe = ring_.sqe();
          if (!sqe) return Status::IoError("io_uring: no submission queue entry available");
          prep(sqe, v, graph.node(v));
          record_submit(result, v, t);
          NANOTRACE(iograph, node_submit, "graph={} node={} backend={} op={} offset={}", gid, v,
                    backend_, graph.node(v).op, graph.node(v).offset + done_bytes_[v]);
          ++inflight;
        }
        // With nothing left to queue, wait for the whole remainder: that is the barrier.
        const unsigned wait_nr = head < queue_.size() ? 1 : inflight;
        if (Status s = ring_.submit_and_wait(wait_nr); !s.ok()) return s;
        t = now();
        inflight -= reap([&](uint32_t v, int res) {
          const Outcome outcome = complete(result, v, graph.node(v), res, t);
          NANOTRACE(iograph, node_complete,
                    "graph={} node={} backend={} result={} lat_us={} state={}", gid, v, backend_,
                    res, in_flight_us(result, v, t), result.nodes[v].state);
          if (outcome == Outcome::kPartial) queue_.push_back(v);
        });
      }
      NANOTRACE(iograph, level_barrier, "graph={} level={} nodes={}", gid, level, queue_.size());
    }
    finish(graph, result);
    return Status::Ok();
  }

 private:
  std::vector<uint32_t> queue_;
};

}  // namespace

std::unique_ptr<ExecutorBase> make_level_executor(Target& target, const ExecOptions& options) {
  return std::make_unique<LevelExecutor>(Backend::kUringLevel, target, options);
}

}  // namespace iograph::internal
