// The uring-ready backend: Kahn scheduling in userspace. Every ready node is queued (up to
// the queue depth) and the batch goes to the kernel with one io_uring_submit_and_wait; all
// available completions are then reaped at once and their successors released, so each
// system call both submits the newly ready work and collects finished work.
#include <nanotrace/nanotrace.hpp>

#include "executor_base.hpp"

namespace iograph::internal {
namespace {

class ReadyExecutor final : public ExecutorBase {
 public:
  using ExecutorBase::ExecutorBase;

  Status run(const Graph& graph, RunResult& result) override {
    if (Status s = begin(graph, result); !s.ok()) return s;
    const uint32_t n = graph.size();
    const uint64_t gid = graph_id_;
    // A FIFO of ready node ids; partial transfers re-enter it, so it can exceed n entries.
    ready_.clear();
    ready_.reserve(2 * static_cast<size_t>(n));
    for (uint32_t v = 0; v < n; ++v) {
      if (missing_[v] == 0) ready_.push_back(v);
    }
    size_t head = 0;
    uint32_t inflight = 0;
    for (;;) {
      uint64_t t = now();
      while (head < ready_.size() && inflight < options_.queue_depth) {
        const uint32_t v = ready_[head++];
        io_uring_sqe* sqe = ring_.sqe();
        if (!sqe) return Status::IoError("io_uring: no submission queue entry available");
        prep(sqe, v, graph.node(v));
        record_submit(result, v, t);
        NANOTRACE(iograph, node_submit, "graph={} node={} backend={} op={} offset={}", gid, v,
                  backend_, graph.node(v).op, graph.node(v).offset + done_bytes_[v]);
        ++inflight;
      }
      if (inflight == 0) break;
      if (Status s = ring_.submit_and_wait(1); !s.ok()) return s;
      t = now();
      inflight -= reap([&](uint32_t v, int res) {
        const Outcome outcome = complete(result, v, graph.node(v), res, t);
        NANOTRACE(iograph, node_complete,
                  "graph={} node={} backend={} result={} lat_us={} state={}", gid, v, backend_, res,
                  in_flight_us(result, v, t), result.nodes[v].state);
        if (outcome == Outcome::kPartial) {
          ready_.push_back(v);
        } else if (outcome == Outcome::kDone) {
          for (uint32_t s : graph.successors(v)) {
            if (--missing_[s] == 0) ready_.push_back(s);
          }
        }
      });
    }
    finish(graph, result);
    return Status::Ok();
  }

 private:
  std::vector<uint32_t> ready_;
};

}  // namespace

std::unique_ptr<ExecutorBase> make_ready_executor(Target& target, const ExecOptions& options) {
  return std::make_unique<ReadyExecutor>(Backend::kUringReady, target, options);
}

}  // namespace iograph::internal
