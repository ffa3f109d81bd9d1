// iograph: executors run a finalized Graph against a Target, starting each node only after
// all its predecessors completed successfully, and report per node what happened.
//   sync         blocking pread/pwrite/fdatasync in topological order.
//   uring-ready  Kahn scheduling on io_uring: submit every ready node (up to the queue
//                depth) in one batch, wait, release successors of what completed, repeat.
//   uring-level  one barrier per level: submit a whole level, wait for all of it.
//   uring-link   offline path cover into linear chains; a chain is submitted as one
//                IOSQE_IO_LINK chain once its head's predecessors are done. Short transfers
//                and -ECANCELED members are resubmitted (rest of the chain relinked), never
//                lost.
// A node that fails (negative result, or a transfer that makes no progress) is listed in
// RunResult::failed; nodes that could not run because a predecessor failed are listed in
// RunResult::skipped. A run always terminates.
//
// Thread safety: an Executor owns one ring and its buffers; use it from one thread at a
// time (SINGLE_ISSUER rings: only from the thread that created it). Distinct executors may
// run concurrently, also on the same Target.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "iograph/graph.hpp"
#include "iograph/target.hpp"
#include "nanotrace/enum.hpp"

namespace iograph {

enum class Backend : uint8_t { kSync, kUringReady, kUringLevel, kUringLink };
// Traced backend fields print these names (nanotrace/enum.hpp); backend_name() gives the same.
NANOTRACE_ENUM(Backend, {Backend::kSync, "sync"}, {Backend::kUringReady, "uring-ready"},
               {Backend::kUringLevel, "uring-level"}, {Backend::kUringLink, "uring-link"});

// "sync", "uring-ready", "uring-level", "uring-link".
std::string_view backend_name(Backend backend);
// Errors: kInvalidArgument for an unknown name.
Result<Backend> parse_backend(std::string_view text);

struct ExecOptions {
  uint32_t queue_depth = 64;   // most operations in flight; ring size (power of two above)
  bool sqpoll = false;         // IORING_SETUP_SQPOLL
  bool coop_taskrun = false;   // IORING_SETUP_COOP_TASKRUN
  bool defer_taskrun = false;  // IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN
  bool fixed_files = false;    // io_uring_register_files + IOSQE_FIXED_FILE
  bool fixed_buffers = false;  // io_uring_register_buffers + read/write_fixed
  bool record_times = true;    // per-node submit/complete times (one clock read per batch)
  uint64_t graph_id = 0;       // carried in trace events to tell runs apart
};

enum class NodeState : uint8_t { kPending, kOk, kFailed, kSkipped };
NANOTRACE_ENUM(NodeState, {NodeState::kPending, "pending"}, {NodeState::kOk, "ok"},
               {NodeState::kFailed, "failed"}, {NodeState::kSkipped, "skipped"});

struct NodeRecord {
  NodeState state = NodeState::kPending;
  int32_t result = 0;         // bytes transferred, 0 (fsync, nop) or the negative errno
  uint32_t submissions = 0;   // how often the node was handed to the kernel (resubmits > 1)
  uint64_t submit_seq = 0;    // run-wide event counter when last submitted (0: never)
  uint64_t complete_seq = 0;  // run-wide event counter when it finished (0: never)
  // For uring-link: the chain member this node was linked behind in its last submission
  // (the kernel, not userspace, ordered the two), else -1.
  int64_t linked_after = -1;
  uint64_t submit_ns = 0;    // since the run started
  uint64_t complete_ns = 0;  // since the run started
};

struct RunResult {
  std::vector<NodeRecord> nodes;
  std::vector<uint32_t> failed;   // ascending ids
  std::vector<uint32_t> skipped;  // ascending ids
  uint32_t ok_count = 0;
  uint64_t enter_calls = 0;  // io_uring_enter system calls made by this run
  uint64_t elapsed_ns = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual Backend backend() const = 0;

  // run: executes every node of `graph` once (a finalized graph), filling `result`, which is
  // reused without reallocation across runs of same-sized graphs.
  // Returns Ok when the run completed, even with failed nodes (see result.failed).
  // A read or write that crosses the target's end completes short; the rest is resubmitted
  // and fails (-ENODATA, or -EINVAL under O_DIRECT), failing the node.
  // Errors: kInvalidArgument when the graph is not finalized, uses a file slot other than 0,
  // or has a transfer starting past the target's end; kIoError when the ring itself fails.
  virtual Status run(const Graph& graph, RunResult& result) = 0;
};

// make_executor: creates an executor (and for io_uring backends its ring, registered file
// and buffers) for `target`, which must outlive it.
// Errors: kInvalidArgument for a zero queue depth or options the backend cannot use;
// kIoError/kUnsupported when the ring cannot be set up with the requested flags.
Result<std::unique_ptr<Executor>> make_executor(Backend backend, Target& target,
                                                const ExecOptions& options);

}  // namespace iograph
