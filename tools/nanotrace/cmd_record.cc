// `nanotrace record`, `snapshot`, `recover` and `clean`: writing trace files from a live
// process (as its consumer, or as a non-consuming snapshot), from a dead process's segment,
// and removing segments left by processes that are gone.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "base/utf8.hpp"
#include "nanotrace/record.hpp"
#include "record_commands.hpp"

namespace nanotrace::cli {
namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

void print_losses(const RecordSummary& s) {
  const bool pids = !s.processes.empty();
  if (pids) std::fprintf(stderr, "%-8s ", "PID");
  std::fprintf(stderr, "%-8s %-16s %12s %12s %12s %12s\n", "TID", "THREAD", "RECORDS",
               "OVERWRITTEN", "DROPPED", "RECLAIMED");
  for (const RecordedThread& t : s.threads) {
    if (pids) std::fprintf(stderr, "%-8u ", t.pid);
    std::fprintf(stderr, "%-8u %-16s %12llu %12llu %12llu %12llu\n", t.tid,
                 utf8::escape_text(t.name).c_str(), static_cast<unsigned long long>(t.records),
                 static_cast<unsigned long long>(t.overwritten),
                 static_cast<unsigned long long>(t.dropped),
                 static_cast<unsigned long long>(t.reclaimed));
  }
  for (const RecordedProcess& p : s.processes) {
    std::fprintf(stderr, "process %u (%s): %llu records, %llu lost\n", p.pid,
                 utf8::escape_text(p.name).c_str(), static_cast<unsigned long long>(p.records),
                 static_cast<unsigned long long>(p.lost));
  }
  std::fprintf(stderr, "%s: lost_no_slot %llu, lost_reclaimed %llu; total lost %llu\n",
               pids ? "processes" : "process", static_cast<unsigned long long>(s.lost_no_slot),
               static_cast<unsigned long long>(s.lost_reclaimed),
               static_cast<unsigned long long>(s.lost()));
  // A damaged block's records are in the overwritten count (the next block's sequence
  // number says how many); say that it was damage.
  for (const RecordedThread& t : s.threads) {
    if (t.corrupt_blocks == 0) continue;
    std::fprintf(stderr, "thread %u (%s): %llu corrupt blocks skipped\n", t.tid,
                 utf8::escape_text(t.name).c_str(),
                 static_cast<unsigned long long>(t.corrupt_blocks));
  }
}

}  // namespace

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

void print_trigger_outcome(const std::string& prefix, const std::string& stop_match,
                           const std::vector<std::string>& snapshots,
                           const std::vector<SnapshotKernel>& snapshot_kernel,
                           const std::vector<std::string>& trigger_counts) {
  if (!stop_match.empty()) {
    std::fprintf(stderr, "%sstopped on %s\n", prefix.c_str(),
                 utf8::escape_text(stop_match).c_str());
  }
  for (const std::string& counts : trigger_counts) {
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), utf8::escape_text(counts).c_str());
  }
  for (size_t i = 0; i < snapshots.size(); ++i) {
    std::string kernel;
    if (i < snapshot_kernel.size()) {
      kernel =
          fmt::format(" (kernel: {} ftrace sub-buffers; {} kernel events lost since the start)",
                      snapshot_kernel[i].pages, snapshot_kernel[i].lost);
    }
    std::fprintf(stderr, "%ssnapshot written: %s%s\n", prefix.c_str(), snapshots[i].c_str(),
                 kernel.c_str());
  }
}

void register_record_commands(CLI::App& app, RecordCommands* c) {
  c->record = app.add_subcommand("record", "Record live processes into a trace file");
  c->record
      ->add_option("SOURCE", c->sources,
                   "pid or name:NAME (every live process of that name); several go into one "
                   "trace file, each as its own process")
      ->required();
  c->record->add_option("-o,--output", c->output, "trace file to write")->required();
  c->record->add_option("--duration", c->duration, "stop after S seconds");
  c->record->add_option("--groups", c->groups,
                        "enable exactly these groups (all, io,sched, all,-debug)");
  c->record->add_flag("--compress", c->compress, "zstd-compress each chunk");
  c->record->add_option("--stop-on", c->stop_on, "stop right after a record matching EXPR");
  c->record->add_option("--snapshot-on", c->snapshot_on,
                        "write OUTPUT.snapN of the rings of every process when a record matches "
                        "EXPR (at most one a second)");
  c->record->add_option("--kernel", c->kernel,
                        "also record kernel events (root): block, io_uring, sched, syscalls, "
                        "another ftrace system or system:event, comma-separated");
  c->record
      ->add_option("--kernel-buffer", c->kernel_buffer_kb,
                   "ftrace's buffer per CPU in KiB (default 4096; a small one loses events, "
                   "counted)")
      ->check(CLI::Range(4u, 1u << 20));
  c->record
      ->add_option("--kernel-flight-buffer", c->kernel_flight_buffer_kb,
                   "with --kernel and --snapshot-on: each snapshot also holds the kernel events "
                   "of the same window, kept by a second ftrace instance in overwrite mode with "
                   "this buffer per CPU in KiB (default 4096; events it overwrote are counted "
                   "lost in the snapshot)")
      ->check(CLI::Range(4u, 1u << 20));

  c->snapshot = app.add_subcommand(
      "snapshot",
      "Copy the rings of a live process now (kernel events: see record --snapshot-on --kernel)");
  c->snapshot->add_option("SOURCE", c->source, "pid or name:NAME")->required();
  c->snapshot->add_option("-o,--output", c->output, "trace file to write")->required();
  c->snapshot->add_flag("--compress", c->compress, "zstd-compress each chunk");
  c->snapshot->add_option("--kernel", c->kernel,
                          "refused: the kernel keeps no history of its own; use `record SRC -o F "
                          "--snapshot-on EXPR --kernel GROUPS`, whose snapshots carry it");

  c->recover = app.add_subcommand("recover", "Extract the records a dead process left behind");
  c->recover->add_option("SOURCE", c->source, "pid or segment path")->required();
  c->recover->add_option("-o,--output", c->output, "trace file to write")->required();
  c->recover->add_flag("--compress", c->compress, "zstd-compress each chunk");

  c->clean = app.add_subcommand("clean", "Remove segments of processes that are gone");
  c->clean->add_flag("--dry-run", c->dry_run, "only list what would be removed");
}

int cmd_record(const RecordCommands& c) {
  RecordOptions o;
  o.output = c.output;
  o.duration_s = c.duration;
  o.groups = split_list(c.groups);
  o.compress = c.compress;
  o.stop_on = c.stop_on;
  o.snapshot_on = c.snapshot_on;
  o.kernel = split_list(c.kernel);
  o.kernel_buffer_kb = c.kernel_buffer_kb;
  o.kernel_flight_buffer_kb = c.kernel_flight_buffer_kb;
  o.stop = &g_stop;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = isatty(STDERR_FILENO);
  uint64_t last_records = 0;
  double last_s = 0;
  if (tty) {
    o.progress = [&](const RecordProgress& p) {
      double rate =
          p.seconds > last_s ? double(p.records - last_records) / (p.seconds - last_s) : 0;
      last_records = p.records;
      last_s = p.seconds;
      std::fprintf(stderr, "\r%7.1f s  %12.0f events/s  %10.1f MB written  %llu lost   ", p.seconds,
                   rate, double(p.bytes) / 1e6, static_cast<unsigned long long>(p.lost));
    };
  }
  auto r = record_processes(c.sources, o);
  if (tty) std::fprintf(stderr, "\n");
  if (!r.ok()) return fail(r.status());
  const RecordSummary& s = *r;
  for (const std::string& w : s.warnings) {
    std::fprintf(stderr, "nanotrace: warning: %s\n", utf8::escape_text(w).c_str());
  }
  std::string of;
  if (!s.processes.empty()) of = " of " + std::to_string(s.processes.size()) + " processes";
  std::fprintf(stderr, "recorded %llu records%s (%.1f MB of rings, %.1f MB file) in %.2f s: %s\n",
               static_cast<unsigned long long>(s.records), of.c_str(), double(s.data_bytes) / 1e6,
               double(s.file_bytes) / 1e6, s.seconds, s.reason.c_str());
  if (!o.kernel.empty() && s.kernel_pages > 0) {
    std::fprintf(stderr, "kernel: %llu ftrace sub-buffers, %llu kernel events lost\n",
                 static_cast<unsigned long long>(s.kernel_pages),
                 static_cast<unsigned long long>(s.kernel_lost));
  }
  print_trigger_outcome("", s.stop_match, s.snapshots, s.snapshot_kernel, s.trigger_counts);
  print_losses(s);
  return 0;
}

int cmd_snapshot(const RecordCommands& c, bool recover) {
  if (!recover && !c.kernel.empty()) {
    // A one-shot copy cannot go back in time: the kernel's events are only there if an
    // instance was capturing them before the snapshot.
    return fail(Status::Invalid(
        "snapshot --kernel: the kernel keeps no history to copy; run `nanotrace record " +
        c.source + " -o FILE --snapshot-on EXPR --kernel " + c.kernel +
        "`, whose snapshots hold the kernel's last events"));
  }
  auto opened = Trace::open(c.source);
  if (!opened.ok()) return fail(opened.status());
  Trace& trace = **opened;
  if (trace.is_file()) return fail(Status::Invalid(c.source + " is already a trace file"));
  if (recover && trace.process().alive) {
    // A dead process whose pid was reused has its segment set aside under another name.
    return fail(Status::Invalid("process " + std::to_string(trace.process().pid) +
                                " is still running (use `nanotrace snapshot`; `nanotrace list` "
                                "shows the segments of earlier processes with this pid)"));
  }
  if (!recover && !trace.process().alive) {
    return fail(Status::Invalid("process " + std::to_string(trace.process().pid) +
                                " is not running (use `nanotrace recover`)"));
  }
  auto r = write_snapshot(trace, c.output, c.compress);
  if (!r.ok()) return fail(r.status());
  std::fprintf(stderr, "%s %llu records of process %u into %s (%.1f MB)\n",
               recover ? "recovered" : "snapshot of", static_cast<unsigned long long>(r->records),
               trace.process().pid, c.output.c_str(), double(r->file_bytes) / 1e6);
  print_losses(*r);
  return 0;
}

int cmd_clean(const RecordCommands& c) {
  int status = 0;
  for (const StaleSegment& s : clean_segments(c.dry_run)) {
    if (!s.error.empty()) {
      std::fprintf(stderr, "nanotrace: cannot remove %s: %s\n", s.path.c_str(), s.error.c_str());
      status = 1;
      continue;
    }
    fmt::print("{} {} (pid {}, {}, {} bytes)\n", c.dry_run ? "would remove" : "removed", s.path,
               s.pid, s.name.empty() ? "unreadable" : utf8::escape_text(s.name), s.bytes);
  }
  for (const StaleKernelInstance& k : clean_kernel_instances(c.dry_run)) {
    if (!k.error.empty()) {
      std::fprintf(stderr, "nanotrace: cannot remove tracefs instance %s: %s\n", k.name.c_str(),
                   k.error.c_str());
      status = 1;
      continue;
    }
    fmt::print("{} tracefs instance {} (recorder pid {})\n", c.dry_run ? "would remove" : "removed",
               k.name, k.pid);
  }
  return status;
}

bool run_record_commands(const RecordCommands& c, int* status) {
  if (c.record && c.record->parsed()) {
    *status = cmd_record(c);
  } else if (c.snapshot && c.snapshot->parsed()) {
    *status = cmd_snapshot(c, false);
  } else if (c.recover && c.recover->parsed()) {
    *status = cmd_snapshot(c, true);
  } else if (c.clean && c.clean->parsed()) {
    *status = cmd_clean(c);
  } else {
    return false;
  }
  return true;
}

}  // namespace nanotrace::cli
