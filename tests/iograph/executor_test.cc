// Executors: the dependency order recorded in RunResult, error propagation and ring options,
// for every shape and backend on the nop target and on a file target in a temp dir.
#include "iograph/executor.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "iograph/generator.hpp"

namespace iograph {
namespace {

const char* const kShapes[] = {"flat", "chain(8)", "rope",     "braid(4)",
                               "tree", "rtree",    "forkjoin", "graph(2,16)"};
const Backend kBackends[] = {Backend::kSync, Backend::kUringReady, Backend::kUringLevel,
                             Backend::kUringLink};

Graph make(std::string_view shape, OpKind op = OpKind::kRead, uint32_t nodes = 128) {
  GenOptions options;
  options.nodes = nodes;
  options.op = op;
  options.seed = 5;
  Result<Graph> graph = generate(parse_shape(shape).value(), options);
  EXPECT_TRUE(graph.ok()) << graph.status().message();
  return std::move(graph).value();
}

// For each edge u->v where v ran (has a completion): u succeeded, and u completed before v was
// submitted (or, when the kernel linked v behind u, u's completion was seen before v's).
void expect_order_respected(const Graph& graph, const RunResult& result, const std::string& what) {
  std::set<uint64_t> seqs;
  for (uint32_t v = 0; v < graph.size(); ++v) {
    const NodeRecord& rv = result.nodes[v];
    if (rv.complete_seq == 0) {
      // Never ran: either never submitted, or queued in a link chain the kernel cancelled.
      if (rv.submit_seq != 0) {
        EXPECT_GE(rv.linked_after, 0) << what << ": node " << v << " submitted, never finished";
      }
      continue;
    }
    EXPECT_TRUE(seqs.insert(rv.complete_seq).second || rv.complete_seq == 0) << what;
    for (uint32_t u : graph.predecessors(v)) {
      const NodeRecord& ru = result.nodes[u];
      EXPECT_EQ(ru.state, NodeState::kOk) << what << ": node " << v << " ran after failed " << u;
      EXPECT_NE(ru.complete_seq, 0u) << what;
      if (rv.linked_after == static_cast<int64_t>(u)) {
        EXPECT_LT(ru.complete_seq, rv.complete_seq) << what << ": linked edge " << u << "->" << v;
      } else {
        EXPECT_LT(ru.complete_seq, rv.submit_seq) << what << ": edge " << u << "->" << v;
      }
    }
  }
}

void run_all_ok(Target& target, const ExecOptions& options, OpKind op, const char* label) {
  for (Backend backend : kBackends) {
    Result<std::unique_ptr<Executor>> executor = make_executor(backend, target, options);
    ASSERT_TRUE(executor.ok()) << executor.status().message();
    for (const char* shape : kShapes) {
      Graph graph = make(shape, op);
      RunResult result;
      for (int repeat = 0; repeat < 2; ++repeat) {  // the second run reuses the executor
        ASSERT_TRUE((*executor)->run(graph, result).ok());
        const std::string what =
            std::string(label) + " " + shape + " " + std::string(backend_name(backend));
        EXPECT_EQ(result.ok_count, graph.size()) << what;
        EXPECT_TRUE(result.failed.empty()) << what;
        EXPECT_TRUE(result.skipped.empty()) << what;
        for (const NodeRecord& r : result.nodes) {
          EXPECT_EQ(r.state, NodeState::kOk) << what;
          if (op == OpKind::kRead && target.kind() != TargetKind::kNop) {
            EXPECT_EQ(r.result, 4096) << what;
          }
        }
        expect_order_respected(graph, result, what);
        if (backend == Backend::kSync) {
          EXPECT_EQ(result.enter_calls, 0u);
        } else {
          EXPECT_GT(result.enter_calls, 0u) << what;
        }
      }
    }
  }
}

class TempFile {
 public:
  explicit TempFile(size_t bytes) {
    std::string tmpl = ::testing::TempDir() + "/iograph-test-XXXXXX";
    int fd = ::mkstemp(tmpl.data());
    EXPECT_GE(fd, 0);
    path_ = tmpl;
    std::string data(bytes, 'x');
    EXPECT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(bytes));
    ::close(fd);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ExecutorTest, EveryShapeAndBackendRespectsDependenciesOnNop) {
  auto target = open_target("nop");
  ASSERT_TRUE(target.ok());
  run_all_ok(**target, ExecOptions{}, OpKind::kRead, "nop");
}

TEST(ExecutorTest, SmallQueueDepthSplitsChainsAndStillRespectsOrder) {
  auto target = open_target("nop");
  ASSERT_TRUE(target.ok());
  ExecOptions options;
  options.queue_depth = 3;
  run_all_ok(**target, options, OpKind::kRead, "nop qd3");
}

TEST(ExecutorTest, EveryShapeAndBackendRespectsDependenciesOnFile) {
  TempFile file(128 * 4096);
  auto target = open_target("file:" + file.path());
  ASSERT_TRUE(target.ok()) << target.status().message();
  run_all_ok(**target, ExecOptions{}, OpKind::kRead, (*target)->describe().c_str());
  run_all_ok(**target, ExecOptions{}, OpKind::kWrite, "file write");
}

TEST(ExecutorTest, RingOptionsWorkOnFile) {
  TempFile file(128 * 4096);
  auto target = open_target("file:" + file.path());
  ASSERT_TRUE(target.ok());
  ExecOptions fixed;
  fixed.fixed_files = fixed.fixed_buffers = true;
  run_all_ok(**target, fixed, OpKind::kRead, "fixed");
  ExecOptions defer;
  defer.defer_taskrun = true;
  run_all_ok(**target, defer, OpKind::kRead, "defer");
  ExecOptions coop;
  coop.coop_taskrun = true;
  coop.queue_depth = 8;
  run_all_ok(**target, coop, OpKind::kRead, "coop");
  ExecOptions sqpoll;
  sqpoll.sqpoll = true;
  run_all_ok(**target, sqpoll, OpKind::kRead, "sqpoll");
}

TEST(ExecutorTest, FsyncNodesRun) {
  TempFile file(4096);
  auto target = open_target("file:" + file.path());
  ASSERT_TRUE(target.ok());
  run_all_ok(**target, ExecOptions{}, OpKind::kFsync, "fsync");
}

// Descendants of `node` in `graph`, without `node` itself.
std::set<uint32_t> descendants(const Graph& graph, uint32_t node) {
  std::set<uint32_t> out;
  std::vector<uint32_t> stack{node};
  while (!stack.empty()) {
    uint32_t u = stack.back();
    stack.pop_back();
    for (uint32_t v : graph.successors(u)) {
      if (out.insert(v).second) stack.push_back(v);
    }
  }
  return out;
}

TEST(ExecutorTest, InjectedFailureSkipsExactlyTheDescendants) {
  auto target = open_target("nop");
  ASSERT_TRUE(target.ok());
  for (const char* shape : kShapes) {
    Graph graph = make(shape);
    for (uint32_t victim : {0u, 5u, 17u, 127u}) {
      (*target)->clear_injections();
      ASSERT_TRUE((*target)->inject_failure(victim, -EIO).ok());
      const std::set<uint32_t> lost = descendants(graph, victim);
      for (Backend backend : kBackends) {
        auto executor = make_executor(backend, **target, ExecOptions{});
        ASSERT_TRUE(executor.ok());
        RunResult result;
        ASSERT_TRUE((*executor)->run(graph, result).ok());
        const std::string what = std::string(shape) + " " + std::string(backend_name(backend)) +
                                 " victim " + std::to_string(victim);
        EXPECT_EQ(result.failed, std::vector<uint32_t>{victim}) << what;
        EXPECT_EQ(result.nodes[victim].result, -EIO) << what;
        EXPECT_EQ(std::set<uint32_t>(result.skipped.begin(), result.skipped.end()), lost) << what;
        EXPECT_EQ(result.ok_count + 1 + lost.size(), graph.size()) << what;
        for (uint32_t s : lost) {
          // Never ran. uring-link may have queued it behind its chain, where the kernel
          // cancelled it; nothing else may have submitted it.
          EXPECT_EQ(result.nodes[s].complete_seq, 0u) << what;
          if (result.nodes[s].submit_seq != 0) {
            EXPECT_GE(result.nodes[s].linked_after, 0) << what;
          }
        }
        expect_order_respected(graph, result, what);
      }
    }
  }
}

TEST(ExecutorTest, TwoFailuresInOneLinkChainAndAcrossChains) {
  auto target = open_target("nop");
  ASSERT_TRUE(target.ok());
  Graph graph = make("chain(8)");
  ASSERT_TRUE((*target)->inject_failure(3, -EIO).ok());
  ASSERT_TRUE((*target)->inject_failure(40, -ENOSPC).ok());
  for (Backend backend : kBackends) {
    auto executor = make_executor(backend, **target, ExecOptions{});
    ASSERT_TRUE(executor.ok());
    RunResult result;
    ASSERT_TRUE((*executor)->run(graph, result).ok());
    EXPECT_EQ(result.failed, (std::vector<uint32_t>{3, 40}));
    EXPECT_EQ(result.skipped.size(), 12u + 7u);  // 4..15 and 41..47
    EXPECT_EQ(result.nodes[40].result, -ENOSPC);
  }
}

// A rope whose node 3 crosses the end of the file: the short read is resubmitted for the
// remainder (for uring-link: the kernel cancels the rest of the chain, which must not be
// lost), the remainder fails, nodes 4.. are skipped and 0..2 succeed.
TEST(ExecutorTest, ShortReadIsResubmittedThenFailsAtEndOfFile) {
  TempFile file(3 * 4096 + 1904);
  auto target = open_target("file:" + file.path());
  ASSERT_TRUE(target.ok());
  // Node 3 reads the last, partial block; the others read whole blocks.
  Graph rope;
  for (uint32_t i = 0; i < 8; ++i) {
    rope.add_node({OpKind::kRead, 0, i == 3 ? 3 * 4096ull : (i % 3) * 4096ull, 4096, i});
  }
  for (uint32_t i = 1; i < 8; ++i) ASSERT_TRUE(rope.add_edge(i - 1, i).ok());
  ASSERT_TRUE(rope.finalize().ok());
  for (Backend backend : kBackends) {
    auto executor = make_executor(backend, **target, ExecOptions{});
    ASSERT_TRUE(executor.ok());
    RunResult result;
    ASSERT_TRUE((*executor)->run(rope, result).ok());
    const std::string what(backend_name(backend));
    EXPECT_EQ(result.failed, std::vector<uint32_t>{3}) << what;
    EXPECT_EQ(result.skipped, (std::vector<uint32_t>{4, 5, 6, 7})) << what;
    EXPECT_EQ(result.nodes[3].submissions, 2u) << what << ": short read resubmitted once";
    EXPECT_LT(result.nodes[3].result, 0) << what;
    for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(result.nodes[i].result, 4096) << what;
    expect_order_respected(rope, result, what);
  }
}

TEST(ExecutorTest, RejectsGraphsTheTargetCannotServe) {
  TempFile file(4096);
  auto target = open_target("file:" + file.path());
  ASSERT_TRUE(target.ok());
  auto executor = make_executor(Backend::kUringReady, **target, ExecOptions{});
  ASSERT_TRUE(executor.ok());
  RunResult result;
  Status s = (*executor)->run(make("flat"), result);
  EXPECT_EQ(s.code(), nanotrace::StatusCode::kInvalidArgument);
  Graph unfinished;
  unfinished.add_node({});
  EXPECT_FALSE((*executor)->run(unfinished, result).ok());
  auto nop = open_target("nop");
  EXPECT_FALSE(make_executor(Backend::kUringLink, **nop, ExecOptions{.fixed_files = true}).ok());
  EXPECT_FALSE(make_executor(Backend::kUringLink, **nop, ExecOptions{.queue_depth = 0}).ok());
  EXPECT_EQ((*target)->inject_failure(0, -EIO).code(), nanotrace::StatusCode::kUnsupported);
}

TEST(TargetTest, BadSpecsAreErrors) {
  EXPECT_EQ(open_target("disk").status().code(), nanotrace::StatusCode::kInvalidArgument);
  EXPECT_EQ(open_target("file:/nonexistent/x").status().code(), nanotrace::StatusCode::kNotFound);
  EXPECT_FALSE(open_target("file:").ok());
  auto zero = open_target("zero");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ((*zero)->kind(), TargetKind::kZero);
}

}  // namespace
}  // namespace iograph
