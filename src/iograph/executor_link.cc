// The uring-link backend: Christian Dietrich's offline path cover. Before running, the graph
// is cut into linear chains (a node continues its predecessor's chain when it is that
// predecessor's only successor and has no other predecessor; chains are capped at the queue
// depth). A chain is submitted as one IOSQE_IO_LINK chain as soon as its head's predecessors
// are done, so the kernel issues each member right after the previous one without a trip
// to userspace. The kernel breaks a chain on an error or a short transfer and completes the
// rest with -ECANCELED; once all CQEs of a submission are in, the chain resumes from its
// first unfinished member (remainder of a short transfer included) unless a member failed.
#include <algorithm>
#include <cerrno>
#include <nanotrace/nanotrace.hpp>

#include "executor_base.hpp"

namespace iograph::internal {
namespace {

// A node resubmitted this often without finishing (e.g. cancelled every time) fails.
constexpr uint32_t kMaxSubmissions = 64;

class LinkExecutor final : public ExecutorBase {
 public:
  using ExecutorBase::ExecutorBase;

  Status run(const Graph& graph, RunResult& result) override {
    if (Status s = begin(graph, result); !s.ok()) return s;
    plan(graph);
    const uint64_t gid = graph_id_;
    ready_.clear();
    active_.clear();
    for (uint32_t c = 0; c + 1 < chain_begin_.size(); ++c) {
      if (missing_[members_[chain_begin_[c]]] == 0) ready_.push_back(chain_begin_[c]);
    }
    size_t head = 0;
    uint32_t inflight = 0;
    for (;;) {
      uint64_t t = now();
      // Each ready entry is the position (in members_) a chain starts or resumes from.
      while (head < ready_.size()) {
        const uint32_t from = ready_[head];
        const uint32_t chain = chain_of_[members_[from]];
        const uint32_t end = chain_begin_[chain + 1];
        const uint32_t length = end - from;
        if (inflight + length > options_.queue_depth) break;
        ++head;
        if (Status s = ring_.reserve(length); !s.ok()) return s;
        for (uint32_t i = from; i < end; ++i) {
          const uint32_t v = members_[i];
          io_uring_sqe* sqe = ring_.sqe();
          prep(sqe, v, graph.node(v));
          if (i + 1 < end) sqe->flags |= IOSQE_IO_LINK;
          record_submit(result, v, t);
          result.nodes[v].linked_after = i > from ? members_[i - 1] : -1;
          NANOTRACE(iograph, node_submit, "graph={} node={} backend={} op={} offset={}", gid, v,
                    backend_, graph.node(v).op, graph.node(v).offset + done_bytes_[v]);
        }
        outstanding_[chain] = length;
        active_.push_back(chain);
        inflight += length;
        NANOTRACE(iograph, chain_submit, "graph={} head={} length={}", gid, members_[from], length);
      }
      if (inflight == 0) break;
      if (Status s = ring_.submit_and_wait(wait_target()); !s.ok()) return s;
      t = now();
      inflight -= reap([&](uint32_t v, int res) { on_completion(graph, result, v, res, t); });
    }
    finish(graph, result);
    return Status::Ok();
  }

 private:
  void on_completion(const Graph& graph, RunResult& result, uint32_t v, int res, uint64_t t) {
    const uint64_t gid = graph_id_;
    NodeRecord& rec = result.nodes[v];
    const bool cancelled_link = res == -ECANCELED && rec.linked_after >= 0;
    if (cancelled_link) {
      // Broken off behind an earlier member: not this node's failure; it runs again.
    } else if (res == -ECANCELED && rec.submissions < kMaxSubmissions) {
      // Cancelled as a chain head (not by us): retried as well, a bounded number of times.
    } else {
      const Outcome outcome = complete(result, v, graph.node(v), res, t);
      if (outcome == Outcome::kPartial && rec.submissions >= kMaxSubmissions) {
        rec.state = NodeState::kFailed;
      }
      if (outcome == Outcome::kDone) {
        const uint32_t chain = chain_of_[v];
        for (uint32_t s : graph.successors(v)) {
          if (chain_of_[s] == chain) continue;  // the in-chain successor is already linked
          if (--missing_[s] == 0) ready_.push_back(position_[s]);
        }
      }
    }
    // After the bookkeeping, so that `state` says what became of the node.
    NANOTRACE(iograph, node_complete, "graph={} node={} backend={} result={} lat_us={} state={}",
              gid, v, backend_, res, in_flight_us(result, v, t), rec.state);
    const uint32_t chain = chain_of_[v];
    if (--outstanding_[chain] != 0) return;
    for (size_t i = 0; i < active_.size(); ++i) {
      if (active_[i] == chain) {
        active_[i] = active_.back();
        active_.pop_back();
        break;
      }
    }
    // Whole submission accounted for: resume at the first member that has not succeeded.
    for (uint32_t i = chain_begin_[chain]; i < chain_begin_[chain + 1]; ++i) {
      const NodeRecord& member = result.nodes[members_[i]];
      if (member.state == NodeState::kOk) continue;
      if (member.state == NodeState::kPending) {
        NANOTRACE(iograph, chain_resume, "graph={} node={} done={}", gid, members_[i],
                  done_bytes_[members_[i]]);
        ready_.push_back(i);
      }
      break;  // a failed member leaves the rest pending: they are skipped
    }
  }

  // How many CQEs to wait for. Nothing new becomes ready before some chain has posted all
  // its outstanding CQEs (a tail completes, or a break cancels the rest), so waiting for the
  // smallest outstanding count never delays work and saves a wake-up per chain member.
  // With DEFER_TASKRUN the kernel runs completions (and issues the next link) only once
  // that many are pending, and each chain has one member in flight, so never wait for more
  // than the number of chains in flight.
  unsigned wait_target() const {
    uint32_t least = UINT32_MAX;
    for (uint32_t chain : active_) least = std::min(least, outstanding_[chain]);
    if (options_.defer_taskrun) least = std::min<uint32_t>(least, active_.size());
    return std::max<uint32_t>(least, 1);
  }

  // Path cover in topological order; fills members_ (chains back to back), chain_begin_,
  // chain_of_ and position_ (index of a node in members_).
  void plan(const Graph& graph) {
    const uint32_t n = graph.size();
    members_.clear();
    chain_begin_.clear();
    chain_of_.assign(n, UINT32_MAX);
    position_.assign(n, 0);
    const uint32_t cap = options_.queue_depth;
    for (uint32_t v : graph.topological_order()) {
      if (chain_of_[v] != UINT32_MAX) continue;
      const auto chain = static_cast<uint32_t>(chain_begin_.size());
      chain_begin_.push_back(static_cast<uint32_t>(members_.size()));
      uint32_t current = v, length = 0;
      for (;;) {
        chain_of_[current] = chain;
        position_[current] = static_cast<uint32_t>(members_.size());
        members_.push_back(current);
        ++length;
        auto next = graph.successors(current);
        if (length >= cap || next.size() != 1 || graph.predecessors(next[0]).size() != 1) break;
        current = next[0];
      }
    }
    chain_begin_.push_back(static_cast<uint32_t>(members_.size()));
    outstanding_.assign(chain_begin_.size(), 0);
    ready_.reserve(2 * static_cast<size_t>(n));
  }

  std::vector<uint32_t> members_, chain_begin_, chain_of_, position_, outstanding_, ready_;
  std::vector<uint32_t> active_;  // chains with CQEs outstanding
};

}  // namespace

std::unique_ptr<ExecutorBase> make_link_executor(Target& target, const ExecOptions& options) {
  return std::make_unique<LinkExecutor>(Backend::kUringLink, target, options);
}

}  // namespace iograph::internal
