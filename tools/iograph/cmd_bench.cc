// `iograph bench`: runs every shape on every backend, repetitions interleaved across
// backends so drift of the machine hits all of them alike, and prints per (shape, backend)
// the median and p99 time per graph, the ratio to sync and io_uring_enter calls per graph.
// On the nop target it also measures the raw cost of a NOP (one batch submitted and reaped)
// in the same run, the yardstick for the executors' per-node scheduling cost.
#include <fmt/format.h>
#include <liburing.h>

#include <nanotrace/control.hpp>
#include <nlohmann/json.hpp>

#include "base/clock.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "iograph/executor.hpp"
#include "iograph/generator.hpp"

namespace iograph::cli {
namespace {

// Median ns per NOP when `batch` NOPs are queued, submitted with one call and all reaped.
Result<double> raw_nop_ns(const ExecOptions& options, uint32_t batch, int repeat) {
  io_uring ring;
  io_uring_params params = {};
  if (options.coop_taskrun) params.flags |= IORING_SETUP_COOP_TASKRUN;
  if (options.defer_taskrun) {
    params.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  }
  int ret = io_uring_queue_init_params(batch, &ring, &params);
  if (ret < 0) return Status::FromErrno("io_uring_queue_init_params", -ret);
  std::vector<double> samples;
  for (int r = 0; r < repeat + 3; ++r) {
    const uint64_t t0 = nanotrace::sys::monotonic_ns();
    for (uint32_t i = 0; i < batch; ++i) io_uring_prep_nop(io_uring_get_sqe(&ring));
    io_uring_submit_and_wait(&ring, batch);
    unsigned head, seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring, head, cqe) { ++seen; }
    io_uring_cq_advance(&ring, seen);
    if (r >= 3) samples.push_back(static_cast<double>(nanotrace::sys::monotonic_ns() - t0) / batch);
  }
  io_uring_queue_exit(&ring);
  return median(samples);
}

struct Row {
  std::string shape;
  uint32_t nodes, width, critical;
  std::string backend;
  double median_us, p99_us, enters, ratio = 0;
};

struct BenchArgs {
  std::string shapes = "flat,chain(8),rope,braid(4),tree,rtree,forkjoin,graph(2,16)";
  std::string backends = "sync,uring-ready,uring-level,uring-link";
  std::string target = "nop";
  GenOptions gen;
  int repeat = 30;
  int warmup = 3;
  bool json = false;
  bool trace = false;
  ExecOptions exec;
};

// What to run: --shapes and --backends parsed, an executor per backend on the target.
struct BenchPlan {
  std::vector<ShapeSpec> shapes;
  std::vector<Backend> backends;
  std::unique_ptr<Target> target;
  std::vector<std::unique_ptr<Executor>> executors;  // one per backend
};

// What a run measured.
struct BenchResults {
  std::vector<Row> rows;  // per shape, one per backend
  // The flat shape's median ns per node, by backend: the executors' per-node scheduling cost.
  std::optional<double> flat_ns_per_node[4];
  std::optional<double> raw_nop_ns;  // on the nop target: the yardstick for flat_ns_per_node
  uint32_t raw_nop_batch = 0;
};

Result<BenchPlan> plan_bench(const BenchArgs& args) {
  BenchPlan plan;
  for (const std::string& text : split_shape_list(args.shapes)) {
    Result<ShapeSpec> spec = parse_shape(text);
    if (!spec.ok()) return spec.status();
    plan.shapes.push_back(*spec);
  }
  for (const std::string& text : split_list(args.backends)) {
    Result<Backend> b = parse_backend(text);
    if (!b.ok()) return b.status();
    plan.backends.push_back(*b);
  }
  if (plan.shapes.empty() || plan.backends.empty()) {
    return Status::Invalid("need at least one shape and backend");
  }
  if (!args.trace) {
    if (Status s = nanotrace::set_group_enabled("iograph", false);
        !s.ok() && s.code() != nanotrace::StatusCode::kNotFound) {
      return s;
    }
  }
  Result<std::unique_ptr<Target>> target = open_target(args.target);
  if (!target.ok()) return target.status();
  plan.target = std::move(*target);
  for (Backend b : plan.backends) {
    Result<std::unique_ptr<Executor>> e = make_executor(b, *plan.target, args.exec);
    if (!e.ok()) {
      return Status(e.status().code(),
                    fmt::format("{}: {}", backend_name(b), e.status().message()));
    }
    plan.executors.push_back(std::move(*e));
  }
  return plan;
}

// Runs one shape on every backend, repetitions interleaved across backends, and adds a row
// per backend to results.
Status bench_shape(const ShapeSpec& spec, const BenchArgs& args, const BenchPlan& plan,
                   BenchResults* results) {
  Result<Graph> graph = generate(spec, args.gen);
  if (!graph.ok()) return graph.status();
  const std::vector<Backend>& backends = plan.backends;
  std::vector<std::vector<double>> times(backends.size()), enters(backends.size());
  RunResult result;
  for (int r = 0; r < args.warmup + args.repeat; ++r) {
    for (size_t b = 0; b < backends.size(); ++b) {
      if (Status s = plan.executors[b]->run(*graph, result); !s.ok()) return s;
      if (!result.failed.empty()) {
        return Status::IoError(fmt::format("{} on {}: node {} failed with {} ({})",
                                           shape_name(spec), backend_name(backends[b]),
                                           result.failed[0], result.nodes[result.failed[0]].result,
                                           strerror(-result.nodes[result.failed[0]].result)));
      }
      if (r < args.warmup) continue;
      times[b].push_back(static_cast<double>(result.elapsed_ns) / 1e3);
      enters[b].push_back(static_cast<double>(result.enter_calls));
    }
  }
  std::vector<Row>& rows = results->rows;
  double sync_median = 0;
  for (size_t b = 0; b < backends.size(); ++b) {
    Row row{shape_name(spec),
            graph->size(),
            graph->width(),
            graph->critical_path(),
            std::string(backend_name(backends[b])),
            median(times[b]),
            percentile(times[b], 99),
            median(enters[b])};
    if (backends[b] == Backend::kSync) sync_median = row.median_us;
    if (spec.kind == ShapeKind::kFlat) {
      results->flat_ns_per_node[static_cast<int>(backends[b])] =
          row.median_us * 1e3 / graph->size();
    }
    rows.push_back(row);
  }
  for (size_t i = rows.size() - backends.size(); i < rows.size(); ++i) {
    rows[i].ratio = sync_median > 0 ? rows[i].median_us / sync_median : 0;
  }
  return Status::Ok();
}

void print_json(const BenchArgs& args, const BenchPlan& plan, const BenchResults& results) {
  nlohmann::json doc;
  doc["target"] = plan.target->describe();
  doc["queue_depth"] = args.exec.queue_depth;
  doc["repeat"] = args.repeat;
  doc["size"] = args.gen.nodes;
  doc["block_size"] = args.gen.block_size;
  nlohmann::json list = nlohmann::json::array();
  for (const Row& row : results.rows) {
    list.push_back({{"shape", row.shape},
                    {"nodes", row.nodes},
                    {"width", row.width},
                    {"critical_path", row.critical},
                    {"backend", row.backend},
                    {"median_us", row.median_us},
                    {"p99_us", row.p99_us},
                    {"ratio_to_sync", row.ratio},
                    {"enters_per_graph", row.enters}});
  }
  doc["results"] = std::move(list);
  if (const std::optional<double>& raw_nop = results.raw_nop_ns) {
    doc["raw_nop_ns"] = *raw_nop;
    doc["raw_nop_batch"] = results.raw_nop_batch;
    nlohmann::json per_node;
    for (Backend b : plan.backends) {
      if (auto v = results.flat_ns_per_node[static_cast<int>(b)]; v && b != Backend::kSync) {
        per_node[std::string(backend_name(b))] = {{"ns_per_node", *v},
                                                  {"to_raw_nop", *v / *raw_nop}};
      }
    }
    doc["flat_scheduling"] = per_node;
  }
  fmt::print("{}\n", doc.dump(1));
}

void print_table(const BenchArgs& args, const BenchPlan& plan, const BenchResults& results) {
  fmt::print("# target {}, qd {}, {} runs (+{} warm-up), block {} B\n", plan.target->describe(),
             args.exec.queue_depth, args.repeat, args.warmup, args.gen.block_size);
  fmt::print("{:<12} {:>5} {:>5} {:>5} {:<12} {:>10} {:>10} {:>7} {:>8}\n", "shape", "nodes",
             "width", "crit", "backend", "median_us", "p99_us", "ratio", "enters");
  for (const Row& row : results.rows) {
    fmt::print("{:<12} {:>5} {:>5} {:>5} {:<12} {:>10.1f} {:>10.1f} {:>7.3f} {:>8.1f}\n", row.shape,
               row.nodes, row.width, row.critical, row.backend, row.median_us, row.p99_us,
               row.ratio, row.enters);
  }
  if (const std::optional<double>& raw_nop = results.raw_nop_ns) {
    fmt::print("# raw NOP: {:.1f} ns/op (batch of {}, submitted at once and reaped)\n", *raw_nop,
               results.raw_nop_batch);
    for (Backend b : plan.backends) {
      if (auto v = results.flat_ns_per_node[static_cast<int>(b)]; v && b != Backend::kSync) {
        fmt::print("# flat on {}: {:.1f} ns/node = {:.2f} x raw NOP\n", backend_name(b), *v,
                   *v / *raw_nop);
      }
    }
  }
}

// Runs the bench and prints its results.
int run_bench(BenchArgs& args) {
  // Traced runs read the clock per batch so that node_complete carries each I/O's latency.
  args.exec.record_times = args.trace;
  Result<BenchPlan> plan = plan_bench(args);
  if (!plan.ok()) return fail(plan.status());
  BenchResults results;
  for (const ShapeSpec& spec : plan->shapes) {
    if (Status s = bench_shape(spec, args, *plan, &results); !s.ok()) return fail(s);
  }
  if (plan->target->kind() == TargetKind::kNop) {
    results.raw_nop_batch = std::min(args.gen.nodes, args.exec.queue_depth);
    Result<double> raw = raw_nop_ns(args.exec, results.raw_nop_batch, args.repeat);
    if (!raw.ok()) return fail(raw.status());
    results.raw_nop_ns = *raw;
  }
  if (args.json) {
    print_json(args, *plan, results);
  } else {
    print_table(args, *plan, results);
  }
  return 0;
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  args->exec.queue_depth = 128;
  args->exec.record_times = false;
  app.add_option("--shapes", args->shapes, "Comma-separated shapes")->capture_default_str();
  app.add_option("--size,--nodes", args->gen.nodes, "Nodes per graph")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  app.add_option("--block-size", args->gen.block_size, "Bytes per read")
      ->check(CLI::Range(1u, 1u << 24))
      ->capture_default_str();
  app.add_option("--seed", args->gen.seed, "Generator seed")->capture_default_str();
  app.add_option("--backends", args->backends, "Comma-separated backends")->capture_default_str();
  app.add_option("--target", args->target, "nop, zero, file:PATH or loop")->capture_default_str();
  app.add_option("--repeat", args->repeat, "Measured runs per shape and backend")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--warmup", args->warmup, "Unmeasured runs first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_flag("--json", args->json, "Print JSON instead of a table");
  app.add_flag("--trace", args->trace,
               "Keep the iograph tracepoints enabled, with per-node times (default: off)");
  add_ring_options(app, args->exec);
  return [args]() -> int { return run_bench(*args); };
}

}  // namespace iograph::cli
