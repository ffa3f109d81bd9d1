// State and steps every executor shares: validation of a graph against the target, the
// 4096-aligned buffer pool (registered with the ring when asked), how one node becomes an
// SQE or a blocking call, how a result is judged, and the per-node bookkeeping of
// RunResult (sequence numbers, times, failed and skipped lists).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "iograph/executor.hpp"
#include "uring_ring.hpp"

namespace iograph::internal {

enum class Outcome : uint8_t { kDone, kPartial, kFailed };

class ExecutorBase : public Executor {
 public:
  ExecutorBase(Backend backend, Target& target, const ExecOptions& options)
      : backend_(backend), target_(target), options_(options) {}
  ~ExecutorBase() override;
  Backend backend() const override { return backend_; }

  // Sets up the ring (io_uring backends only).
  Status init_ring();

 protected:
  // Validates the graph, sizes the buffers and resets `result` and the per-node arrays.
  Status begin(const Graph& graph, RunResult& result);
  // Marks what never ran as skipped and fills the summary fields.
  void finish(const Graph& graph, RunResult& result);

  // Fills `sqe` for the not yet transferred part of node `id`; user_data = id.
  void prep(io_uring_sqe* sqe, uint32_t id, const Node& node) const;
  // Performs the rest of node `id` with blocking calls; returns the result as io_uring would.
  int execute_blocking(uint32_t id, const Node& node);
  // Judges result `res` of node `id`, recording progress, the final state and the completion
  // sequence number and time.
  Outcome complete(RunResult& result, uint32_t id, const Node& node, int res, uint64_t now_ns);
  void record_submit(RunResult& result, uint32_t id, uint64_t now_ns) {
    NodeRecord& rec = result.nodes[id];
    rec.submit_seq = ++seq_;
    rec.submit_ns = now_ns;
    ++rec.submissions;
  }
  // Nanoseconds since begin() (0 when options.record_times is off).
  uint64_t now() const;
  // Microseconds node `id` has been in flight at `now_ns`, for its completion tracepoint (a
  // trigger such as `iograph:node_complete lat_us>500` catches a slow I/O); 0 without times.
  static uint64_t in_flight_us(const RunResult& result, uint32_t id, uint64_t now_ns) {
    const uint64_t submitted = result.nodes[id].submit_ns;
    return now_ns > submitted ? (now_ns - submitted) / 1000 : 0;
  }
  // Takes every completion the ring holds, calling on_cqe(node id, result) for each in
  // order; returns how many there were.
  template <class OnCqe>
  unsigned reap(OnCqe&& on_cqe) {
    unsigned cq_head, seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(ring_.get(), cq_head, cqe) {
      ++seen;
      on_cqe(static_cast<uint32_t>(cqe->user_data), cqe->res);
    }
    io_uring_cq_advance(ring_.get(), seen);
    return seen;
  }

  Backend backend_;
  uint64_t graph_id_ = 0;  // options.graph_id, or a process-unique number per run
  Target& target_;
  ExecOptions options_;
  Ring ring_;
  std::vector<uint32_t> done_bytes_;  // per node: bytes already transferred
  std::vector<uint32_t> missing_;     // per node: predecessors not yet completed

 private:
  char* pool_ = nullptr;
  size_t pool_bytes_ = 0;
  size_t slot_bytes_ = 0;
  uint64_t seq_ = 0;
  uint64_t start_ns_ = 0;
  uint64_t enters_at_begin_ = 0;
};

// Backends as trace fields: the enum is recorded as its integer value.
std::unique_ptr<Executor> make_sync_executor(Target& target, const ExecOptions& options);
std::unique_ptr<ExecutorBase> make_ready_executor(Target& target, const ExecOptions& options);
std::unique_ptr<ExecutorBase> make_level_executor(Target& target, const ExecOptions& options);
std::unique_ptr<ExecutorBase> make_link_executor(Target& target, const ExecOptions& options);

}  // namespace iograph::internal
