// The executor steps shared by all backends (see executor_base.hpp), and make_executor.
#include "executor_base.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nanotrace/nanotrace.hpp>

#include "base/clock.hpp"

namespace iograph {

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::kSync:
      return "sync";
    case Backend::kUringReady:
      return "uring-ready";
    case Backend::kUringLevel:
      return "uring-level";
    case Backend::kUringLink:
      return "uring-link";
  }
  return "?";
}

Result<Backend> parse_backend(std::string_view text) {
  for (Backend b :
       {Backend::kSync, Backend::kUringReady, Backend::kUringLevel, Backend::kUringLink}) {
    if (text == backend_name(b)) return b;
  }
  return Status::Invalid(fmt::format(
      "unknown backend '{}' (expected sync, uring-ready, uring-level or uring-link)", text));
}

Result<std::unique_ptr<Executor>> make_executor(Backend backend, Target& target,
                                                const ExecOptions& options) {
  if (options.queue_depth == 0 || options.queue_depth > 32768) {
    return Status::Invalid("queue depth must be between 1 and 32768");
  }
  if (backend == Backend::kSync) return internal::make_sync_executor(target, options);
  std::unique_ptr<internal::ExecutorBase> executor;
  switch (backend) {
    case Backend::kUringReady:
      executor = internal::make_ready_executor(target, options);
      break;
    case Backend::kUringLevel:
      executor = internal::make_level_executor(target, options);
      break;
    default:
      executor = internal::make_link_executor(target, options);
      break;
  }
  if (Status s = executor->init_ring(); !s.ok()) return s;
  return std::unique_ptr<Executor>(std::move(executor));
}

namespace internal {

using nanotrace::sys::monotonic_ns;

ExecutorBase::~ExecutorBase() { std::free(pool_); }

Status ExecutorBase::init_ring() {
  if (options_.fixed_files && target_.fd() < 0) {
    return Status::Invalid(
        fmt::format("registered files need a file target, not {}", target_.describe()));
  }
  return ring_.init(options_, target_.fd());
}

uint64_t ExecutorBase::now() const {
  return options_.record_times ? monotonic_ns() - start_ns_ : 0;
}

Status ExecutorBase::begin(const Graph& graph, RunResult& result) {
  static std::atomic<uint64_t> next_graph_id{0};
  graph_id_ = options_.graph_id ? options_.graph_id : ++next_graph_id;
  if (!graph.finalized()) return Status::Invalid("the graph is not finalized");
  const uint32_t n = graph.size();
  bool needs_data = false;
  for (uint32_t i = 0; i < n; ++i) {
    const Node& node = graph.node(i);
    if (node.file != 0) {
      return Status::Invalid(
          fmt::format("node {} uses file slot {}, but targets have only slot 0", i, node.file));
    }
    needs_data |= node.op == OpKind::kRead || node.op == OpKind::kWrite;
  }
  // A transfer that starts inside the target but crosses its end completes short, is
  // resubmitted for the rest and then fails; one that starts beyond the end is a bad graph.
  const uint64_t size = target_.size_bytes();
  for (uint32_t i = 0; i < n && size != 0; ++i) {
    const Node& node = graph.node(i);
    if (node.length != 0 && node.offset >= size) {
      return Status::Invalid(fmt::format("node {} starts at byte {}, but {} has {} bytes", i,
                                         node.offset, target_.describe(), size));
    }
  }
  if (needs_data && target_.kind() != TargetKind::kNop) {
    const size_t slot = (std::max<size_t>(graph.max_length(), 1) + 4095) & ~size_t{4095};
    const size_t bytes = slot * graph.buffer_slots();
    if (bytes > pool_bytes_ || slot != slot_bytes_) {
      std::free(pool_);
      pool_ = static_cast<char*>(std::aligned_alloc(4096, bytes));
      if (!pool_) return Status::IoError("cannot allocate the buffer pool");
      std::memset(pool_, 0x5a, bytes);
      pool_bytes_ = bytes;
      slot_bytes_ = slot;
      if (options_.fixed_buffers && ring_.ready()) {
        if (Status s = ring_.register_buffer(pool_, pool_bytes_); !s.ok()) return s;
      }
    }
  }
  result.nodes.assign(n, NodeRecord{});
  result.failed.clear();
  result.skipped.clear();
  result.ok_count = 0;
  done_bytes_.assign(n, 0);
  missing_.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    missing_[i] = static_cast<uint32_t>(graph.predecessors(i).size());
  seq_ = 0;
  enters_at_begin_ = ring_.enter_calls();
  start_ns_ = monotonic_ns();
  NANOTRACE(iograph, graph_start, "graph={} backend={} nodes={}", graph_id_, backend_, n);
  return Status::Ok();
}

void ExecutorBase::finish(const Graph& graph, RunResult& result) {
  for (uint32_t i = 0; i < graph.size(); ++i) {
    NodeRecord& rec = result.nodes[i];
    if (rec.state == NodeState::kPending) rec.state = NodeState::kSkipped;
    if (rec.state == NodeState::kOk) ++result.ok_count;
    if (rec.state == NodeState::kFailed) result.failed.push_back(i);
    if (rec.state == NodeState::kSkipped) result.skipped.push_back(i);
  }
  result.enter_calls = ring_.enter_calls() - enters_at_begin_;
  result.elapsed_ns = monotonic_ns() - start_ns_;
  NANOTRACE(iograph, graph_end, "graph={} backend={} ok={} failed={} skipped={}", graph_id_,
            backend_, result.ok_count, result.failed.size(), result.skipped.size());
}

void ExecutorBase::prep(io_uring_sqe* sqe, uint32_t id, const Node& node) const {
  const TargetKind kind = target_.kind();
  if (kind == TargetKind::kNop || node.op == OpKind::kNop) {
    io_uring_prep_nop(sqe);
    if (int res = target_.injected(id); res != 0 && kind == TargetKind::kNop) {
      // IORING_NOP_INJECT_RESULT (6.x kernels) through the raw fields liburing 2.3 has.
      sqe->rw_flags = 1;
      sqe->len = static_cast<unsigned>(res);
    }
  } else {
    const int fd = options_.fixed_files ? 0 : target_.fd();
    const uint32_t done = done_bytes_[id];
    char* buf = pool_ + static_cast<size_t>(node.buffer) * slot_bytes_ + done;
    const unsigned len = node.length - done;
    const uint64_t off = node.offset + done;
    switch (node.op) {
      case OpKind::kRead:
        if (options_.fixed_buffers) {
          io_uring_prep_read_fixed(sqe, fd, buf, len, off, 0);
        } else {
          io_uring_prep_read(sqe, fd, buf, len, off);
        }
        break;
      case OpKind::kWrite:
        if (options_.fixed_buffers) {
          io_uring_prep_write_fixed(sqe, fd, buf, len, off, 0);
        } else {
          io_uring_prep_write(sqe, fd, buf, len, off);
        }
        break;
      default:
        io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
        break;
    }
    if (options_.fixed_files) sqe->flags |= IOSQE_FIXED_FILE;
  }
  io_uring_sqe_set_data64(sqe, id);
}

int ExecutorBase::execute_blocking(uint32_t id, const Node& node) {
  const TargetKind kind = target_.kind();
  if (kind == TargetKind::kNop || node.op == OpKind::kNop) {
    return kind == TargetKind::kNop ? target_.injected(id) : 0;
  }
  const int fd = target_.fd();
  const uint32_t done = done_bytes_[id];
  char* buf = pool_ + static_cast<size_t>(node.buffer) * slot_bytes_ + done;
  ssize_t ret;
  do {
    switch (node.op) {
      case OpKind::kRead:
        ret = ::pread(fd, buf, node.length - done, static_cast<off_t>(node.offset + done));
        break;
      case OpKind::kWrite:
        ret = ::pwrite(fd, buf, node.length - done, static_cast<off_t>(node.offset + done));
        break;
      default:
        ret = ::fdatasync(fd);
        break;
    }
  } while (ret < 0 && errno == EINTR);
  return ret < 0 ? -errno : static_cast<int>(ret);
}

Outcome ExecutorBase::complete(RunResult& result, uint32_t id, const Node& node, int res,
                               uint64_t now_ns) {
  NodeRecord& rec = result.nodes[id];
  Outcome outcome = Outcome::kDone;
  const bool transfers =
      target_.kind() != TargetKind::kNop && (node.op == OpKind::kRead || node.op == OpKind::kWrite);
  if (res < 0) {
    outcome = Outcome::kFailed;
  } else if (transfers) {
    done_bytes_[id] += static_cast<uint32_t>(res);
    if (done_bytes_[id] < node.length) {
      // No progress means end of file: the rest can never arrive.
      outcome = res == 0 ? Outcome::kFailed : Outcome::kPartial;
      if (res == 0) res = -ENODATA;
    } else {
      res = static_cast<int>(done_bytes_[id]);
    }
  }
  rec.result = res;
  if (outcome == Outcome::kPartial) return outcome;
  rec.state = outcome == Outcome::kDone ? NodeState::kOk : NodeState::kFailed;
  rec.complete_seq = ++seq_;
  rec.complete_ns = now_ns;
  return outcome;
}

}  // namespace internal
}  // namespace iograph
