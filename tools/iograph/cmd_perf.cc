// `iograph perf`: a null-I/O IOPS test in the manner of SPDK's bdevperf, built to price
// nanotrace. Each worker thread keeps --qd I/Os in flight on its own ring and hits two
// tracepoints per I/O (submit and complete). One process alternates short slices: tracing
// off, tracing on, and the floor (nanotrace::floor_step: TSC read + 32-byte store) run by
// the same workers, so all three see the same machine state; medians over many slices.
// The added cost per I/O is the median over cycles of (ns/IO on - ns/IO off).
#include <fmt/format.h>
#include <liburing.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <nanotrace/reader.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/group_spec.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "floor.hpp"  // bench/: the paired floor
#include "iograph/target.hpp"

namespace iograph::cli {
namespace {

enum Phase : int { kIo = 0, kFloor = 1, kStop = 2 };

struct alignas(64) WorkerCounters {
  std::atomic<uint64_t> ios{0};
  std::atomic<uint64_t> floor_steps{0};
  std::atomic<int> error{0};
  std::atomic<bool> started{false};
};

struct PerfShared {
  std::atomic<int> phase{kIo};
  const Target* target = nullptr;
  ExecOptions options;
  uint32_t block_size = 4096;
};

void prep_io(io_uring_sqe* sqe, const PerfShared& shared, char* buf) {
  if (shared.target->kind() == TargetKind::kNop) {
    io_uring_prep_nop(sqe);
  } else {
    io_uring_prep_read(sqe, shared.target->fd(), buf, shared.block_size, 0);
  }
}

void worker(PerfShared& shared, WorkerCounters& counters, uint32_t thread_index) {
  io_uring ring;
  io_uring_params params = {};
  if (shared.options.coop_taskrun) params.flags |= IORING_SETUP_COOP_TASKRUN;
  if (shared.options.defer_taskrun) {
    params.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  }
  if (shared.options.sqpoll) params.flags |= IORING_SETUP_SQPOLL;
  const uint32_t qd = shared.options.queue_depth;
  int ret = io_uring_queue_init_params(qd, &ring, &params);
  if (ret < 0) {
    counters.error.store(ret);
    counters.started.store(true);
    return;
  }
  char* buf = static_cast<char*>(std::aligned_alloc(4096, (shared.block_size + 4095) & ~4095u));
  auto* floor = new nanotrace::FloorRing();
  uint64_t ios = 0, steps = 0, next_id = 0;
  uint32_t inflight = 0;
  counters.started.store(true);
  for (;;) {
    const int phase = shared.phase.load(std::memory_order_relaxed);
    if (phase == kStop) break;
    if (phase == kFloor && inflight == 0) {
      for (int i = 0; i < 256; ++i) nanotrace::floor_step(*floor, steps + i, thread_index);
      steps += 256;
      counters.floor_steps.store(steps, std::memory_order_relaxed);
      continue;
    }
    if (phase == kIo) {
      while (inflight < qd) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (!sqe) break;
        prep_io(sqe, shared, buf);
        io_uring_sqe_set_data64(sqe, next_id);
        NANOTRACE(iograph, perf_submit, "io={} thread={}", next_id, thread_index);
        ++next_id;
        ++inflight;
      }
    }
    ret = io_uring_submit_and_wait(&ring, 1);
    if (ret < 0 && ret != -EINTR) {
      counters.error.store(ret);
      break;
    }
    unsigned head, seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      NANOTRACE(iograph, perf_complete, "io={} result={}", cqe->user_data, cqe->res);
    }
    io_uring_cq_advance(&ring, seen);
    inflight -= seen;
    ios += seen;
    counters.ios.store(ios, std::memory_order_relaxed);
  }
  while (inflight > 0) {
    io_uring_submit_and_wait(&ring, inflight);
    unsigned ready = io_uring_cq_ready(&ring);
    io_uring_cq_advance(&ring, ready);
    inflight -= ready;
  }
  io_uring_queue_exit(&ring);
  std::free(buf);
  delete floor;
}

// The groups of this process that a group list (`all`, `iograph`, `all,-debug`) selects,
// read from our own segment: the runtime registered every call site at start-up.
Result<std::vector<std::string>> select_own_groups(const std::string& spec) {
  auto self = nanotrace::Trace::open(nanotrace::segment_path());
  if (!self.ok()) return self.status();
  std::vector<std::string> known;
  for (const nanotrace::GroupInfo& g : (*self)->groups()) known.push_back(g.name);
  return nanotrace::groups_selected_by_spec(spec, known);
}

Status set_groups(const std::vector<std::string>& groups, bool enabled) {
  for (const std::string& g : groups) {
    if (Status s = nanotrace::set_group_enabled(g, enabled); !s.ok()) {
      return Status(s.code(), fmt::format("group '{}': {}", g, s.message()));
    }
  }
  return Status::Ok();
}

struct PerfArgs {
  std::string target = "nop";
  double time_s = 5;
  uint32_t threads = 1;
  double slice_ms = 20;
  std::string trace = "iograph";
  uint32_t block_size = 4096;
  bool json = false;
  ExecOptions exec;
};

// The worker threads, one ring each; stopped and joined when it goes.
class WorkerPool {
 public:
  WorkerPool(const Target* target, const PerfArgs& args) : counters_(args.threads) {
    shared_.target = target;
    shared_.options = args.exec;
    shared_.block_size = args.block_size;
  }
  ~WorkerPool() { join(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts the workers and waits until each has its ring. Errors: kIoError (no ring).
  Status start() {
    for (uint32_t i = 0; i < counters_.size(); ++i) {
      threads_.emplace_back(worker, std::ref(shared_), std::ref(counters_[i]), i);
    }
    for (auto& c : counters_) {
      while (!c.started.load()) std::this_thread::yield();
      if (int err = c.error.load(); err != 0) {
        join();
        return Status::FromErrno("io_uring_queue_init_params", -err);
      }
    }
    return Status::Ok();
  }
  void set_phase(Phase phase) { shared_.phase.store(phase); }
  // The workers' counts of member (ios or floor_steps), summed.
  uint64_t sum(std::atomic<uint64_t> WorkerCounters::*member) const {
    uint64_t total = 0;
    for (auto& c : counters_) total += (c.*member).load(std::memory_order_relaxed);
    return total;
  }
  // Stops and joins the workers; then reports the first failed submission.
  Status stop() {
    join();
    for (auto& c : counters_) {
      if (int err = c.error.load(); err != 0) {
        return Status::FromErrno("io_uring_submit_and_wait", -err);
      }
    }
    return Status::Ok();
  }

 private:
  void join() {
    shared_.phase.store(kStop);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  PerfShared shared_;
  std::vector<WorkerCounters> counters_;
  std::vector<std::thread> threads_;
};

// Per measured cycle (off, on and floor slices): the figures of each mode.
struct PerfSamples {
  std::vector<double> iops_off, iops_on, ns_off, ns_on, added, floor_ns;
};

// Alternates off, on and floor slices on the workers for --time, switching groups on and off.
Status measure_cycles(const PerfArgs& args, const std::vector<std::string>& groups,
                      WorkerPool& pool, PerfSamples* out) {
  using Clock = std::chrono::steady_clock;
  // One measured slice: settle after the switch, then count what happened in `slice`.
  const auto slice = std::chrono::duration<double, std::milli>(args.slice_ms);
  const auto settle = slice / 10;
  auto measure = [&](std::atomic<uint64_t> WorkerCounters::*member) {
    std::this_thread::sleep_for(settle);
    const uint64_t c0 = pool.sum(member);
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(slice);
    const uint64_t c1 = pool.sum(member);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    return std::pair<double, double>(static_cast<double>(c1 - c0), ns);
  };
  const int cycles = std::max(4, static_cast<int>(args.time_s * 1000 / (3.3 * args.slice_ms)));
  const int warmup = 2;
  const double threads_n = args.threads;
  for (int cycle = 0; cycle < cycles + warmup; ++cycle) {
    pool.set_phase(kIo);
    if (Status s = set_groups(groups, false); !s.ok()) return s;
    auto [off_ios, off_ns] = measure(&WorkerCounters::ios);
    if (Status s = set_groups(groups, true); !s.ok()) return s;
    auto [on_ios, on_ns] = measure(&WorkerCounters::ios);
    if (Status s = set_groups(groups, false); !s.ok()) return s;
    pool.set_phase(kFloor);
    auto [steps, floor_span] = measure(&WorkerCounters::floor_steps);
    if (cycle < warmup || off_ios == 0 || on_ios == 0 || steps == 0) continue;
    out->iops_off.push_back(off_ios / off_ns * 1e9);
    out->iops_on.push_back(on_ios / on_ns * 1e9);
    const double per_io_off = off_ns * threads_n / off_ios;
    const double per_io_on = on_ns * threads_n / on_ios;
    out->ns_off.push_back(per_io_off);
    out->ns_on.push_back(per_io_on);
    out->added.push_back(per_io_on - per_io_off);
    out->floor_ns.push_back(floor_span * threads_n / steps);
  }
  return Status::Ok();
}

void print_perf(const PerfArgs& args, const Target& target, const PerfSamples& samples) {
  const double off = median(samples.iops_off), on = median(samples.iops_on);
  const double added_ns = median(samples.added), floor = median(samples.floor_ns);
  if (args.json) {
    nlohmann::json doc;
    doc["target"] = target.describe();
    doc["threads"] = args.threads;
    doc["qd"] = args.exec.queue_depth;
    doc["groups"] = args.trace;
    doc["slices_per_mode"] = samples.iops_off.size();
    doc["slice_ms"] = args.slice_ms;
    doc["iops_off"] = off;
    doc["iops_on"] = on;
    doc["overhead_pct"] = (off - on) / off * 100;
    doc["ns_per_io_off"] = median(samples.ns_off);
    doc["ns_per_io_on"] = median(samples.ns_on);
    doc["added_ns_per_io"] = added_ns;
    doc["tracepoints_per_io"] = 2;
    doc["floor_ns"] = floor;
    doc["added_per_io_to_floor"] = added_ns / floor;
    fmt::print("{}\n", doc.dump(1));
    return;
  }
  fmt::print("# {} , {} thread(s), qd {}, {} slices of {} ms per mode, groups {}\n",
             target.describe(), args.threads, args.exec.queue_depth, samples.iops_off.size(),
             args.slice_ms, args.trace);
  fmt::print("tracing off: {:>12.0f} IOPS  {:>8.1f} ns/IO\n", off, median(samples.ns_off));
  fmt::print("tracing on:  {:>12.0f} IOPS  {:>8.1f} ns/IO\n", on, median(samples.ns_on));
  fmt::print("IOPS loss:   {:>11.2f} %\n", (off - on) / off * 100);
  fmt::print("added:       {:>11.1f} ns per I/O (2 tracepoints)\n", added_ns);
  fmt::print("floor:       {:>11.1f} ns (rdtsc + 32-byte store)\n", floor);
  fmt::print("added/floor: {:>11.2f} (target <= 3)\n", added_ns / floor);
}

int run_perf(const PerfArgs& args) {
  Result<std::vector<std::string>> selected = select_own_groups(args.trace);
  if (!selected.ok()) return fail(selected.status());
  const std::vector<std::string> groups = std::move(*selected);
  if (groups.empty()) return fail(fmt::format("--trace {} selects no group", args.trace));
  Result<std::unique_ptr<Target>> target = open_target(args.target);
  if (!target.ok()) return fail(target.status());
  if (Status s = set_groups(groups, false); !s.ok()) return fail(s);
  PerfSamples samples;
  {
    WorkerPool pool(target->get(), args);
    if (Status s = pool.start(); !s.ok()) return fail(s);
    if (Status s = measure_cycles(args, groups, pool, &samples); !s.ok()) return fail(s);
    if (Status s = pool.stop(); !s.ok()) return fail(s);
  }
  if (samples.iops_off.empty()) return fail("no complete slice was measured; raise --time");
  print_perf(args, **target, samples);
  return 0;
}

}  // namespace

Action add_perf_command(CLI::App& app) {
  auto args = std::make_shared<PerfArgs>();
  args->exec.queue_depth = 4;
  app.add_option("--target", args->target, "nop, zero, file:PATH or loop")->capture_default_str();
  app.add_option("--time", args->time_s, "Seconds in total (off, on and floor slices)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--threads", args->threads, "Worker threads, one ring each")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  app.add_option("--slice-ms", args->slice_ms, "Milliseconds per slice")
      ->check(CLI::Range(1.0, 10000.0))
      ->capture_default_str();
  app.add_option("--trace", args->trace, "Groups switched on in the 'on' slices (all, a,b, all,-b)")
      ->capture_default_str();
  app.add_option("--block-size", args->block_size, "Bytes per read (targets other than nop)")
      ->check(CLI::Range(512u, 1u << 20))
      ->capture_default_str();
  app.add_flag("--json", args->json, "Print JSON");
  add_ring_options(app, args->exec);
  return [args]() -> int { return run_perf(*args); };
}

}  // namespace iograph::cli
