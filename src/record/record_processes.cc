// `nanotrace record SRC SRC... -o FILE`: several live processes drained into one trace file of
// several processes through the session `nanotrace run` records with (process_session.hpp),
// with record()'s options: groups, triggers, kernel events, duration, interruption.
//
// Every source is resolved, checked and attached to before the file is created, so a bad one
// (no such pid, a name nobody has, a process another recorder consumes) stops everything with
// one error and leaves no file. `name:NAME` takes every live process of that name: a name
// usually stands for a role (a daemon's workers), and a recording of some of them would be
// a trap.
#include <time.h>

#include <memory>

#include "base/output_file.hpp"
#include "base/process.hpp"
#include "nanotrace/record.hpp"
#include "record/drain_pacing.hpp"
#include "record/kernel_recording.hpp"
#include "record/process_session.hpp"
#include "record/record_controls.hpp"

namespace nanotrace {
namespace {

struct Source {
  std::unique_ptr<Trace> trace;
  std::vector<rec::SlotAtAttach> at_attach;
  rec::BoundTrigger stop_on, snapshot_on;
};

// Opens what one source names (several processes for name:NAME), skipping processes opened
// already.
Status resolve(const std::string& source, std::vector<Source>* out) {
  std::vector<std::unique_ptr<Trace>> found;
  if (source.rfind("name:", 0) == 0) {
    const std::string name = source.substr(5);
    for (const ProcessEntry& e : list_processes()) {
      if (!e.error.empty() || e.info.user_name != name || !e.info.alive) continue;
      auto t = Trace::open_path(e.info.path, /*writable=*/true);
      if (!t.ok()) return Status(t.status().code(), source + ": " + t.status().message());
      found.push_back(std::move(*t));
    }
    if (found.empty()) return Status::NotFound("no live traced process named '" + name + "'");
  } else {
    auto t = Trace::open(source, /*writable=*/true);
    if (!t.ok()) return Status(t.status().code(), source + ": " + t.status().message());
    if ((*t)->is_file()) return Status::Invalid(source + " is a trace file, not a live process");
    found.push_back(std::move(*t));
  }
  for (std::unique_ptr<Trace>& t : found) {
    const ProcessInfo& p = t->process();
    if (!p.alive) {
      return Status::Invalid("process " + std::to_string(p.pid) +
                             " is not running (use `nanotrace recover`)");
    }
    bool twice = false;
    for (const Source& s : *out) twice = twice || s.trace->process().pid == p.pid;
    if (twice) continue;
    out->emplace_back();
    out->back().trace = std::move(t);
  }
  return Status::Ok();
}

void sleep_us(uint64_t us) {
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

}  // namespace

Result<RecordSummary> record_processes(const std::vector<std::string>& sources,
                                       const RecordOptions& options) {
  if (sources.empty()) return Status::Invalid("no process to record");
  if (!(options.duration_s >= 0)) {
    return Status::Invalid("--duration must be a number of seconds >= 0 (0: until stopped)");
  }
  std::vector<Source> procs;
  for (const std::string& source : sources) {
    if (Status s = resolve(source, &procs); !s.ok()) return s;
  }
  if (procs.size() == 1) {
    // One process: the one-process file record() writes.
    const std::string pid = std::to_string(procs[0].trace->process().pid);
    procs.clear();
    return record(pid, options);
  }
  if (procs.size() > 0xffff) return Status::Invalid("more than 65535 processes in one file");
  const abi::ClockKind clock = procs[0].trace->process().clock;
  std::vector<std::string> known_groups;
  for (Source& p : procs) {
    Trace& t = *p.trace;
    if (Status same = check_not_source(options.output, t.source_fd()); !same.ok()) return same;
    if (t.process().clock != clock) {
      return Status::Invalid("processes " + std::to_string(procs[0].trace->process().pid) +
                             " and " + std::to_string(t.process().pid) +
                             " use different clocks (NANOTRACE_CLOCK): record them apart");
    }
    if (!options.stop_on.empty()) {
      Status s = p.stop_on.init(options.stop_on, t);
      if (!s.ok()) return Status(s.code(), "--stop-on: " + s.message());
    }
    if (!options.snapshot_on.empty()) {
      Status s = p.snapshot_on.init(options.snapshot_on, t);
      if (!s.ok()) return Status(s.code(), "--snapshot-on: " + s.message());
    }
    for (const GroupInfo& g : t.groups()) known_groups.push_back(g.name);
  }
  if (!options.groups.empty()) {
    std::string spec;
    for (const std::string& w : options.groups) spec += (spec.empty() ? "" : ",") + w;
    if (Status s = validate_group_spec(spec, known_groups); !s.ok()) return s;
  }
  for (Source& p : procs) {
    p.at_attach = rec::slots_at_attach(*p.trace);
    if (Status s = p.trace->attach_consumer(); !s.ok()) return s;
  }

  rec::FileWriter out;
  Status s = out.open(options.output, procs[0].trace->process().pid, file::FileKind::kRecording,
                      options.compress);
  if (!s.ok()) return s;
  rec::ProcessSession session(out);
  for (Source& p : procs) {
    s = session.add(std::move(p.trace), std::move(p.at_attach), /*attached=*/true,
                    /*owned=*/false);
    if (!s.ok()) return s;
  }
  // Declared after the session, so the groups are restored while its traces are open.
  std::vector<std::unique_ptr<rec::GroupGuard>> groups;
  if (!options.groups.empty()) {
    for (size_t i = 0; i < session.size(); ++i) {
      groups.push_back(std::make_unique<rec::GroupGuard>());
      s = groups.back()->apply(session.trace(i), options.groups, &known_groups);
      if (!s.ok()) return s;
    }
  }

  RecordSummary summary;
  std::unique_ptr<rec::KernelRecording> kernel;
  if (!options.kernel.empty()) {
    std::string warning;
    auto k = rec::KernelRecording::start(options.kernel, options.kernel_buffer_kb,
                                         session.trace(0).process().pid,
                                         clock == abi::ClockKind::kTsc, out, &warning);
    if (!k.ok()) return k.status();
    kernel = std::move(*k);
    if (!warning.empty()) summary.warnings.push_back(warning);
    if (kernel) {
      for (size_t i = 1; i < session.size(); ++i) kernel->follow(session.trace(i).process().pid);
      s = kernel->refresh_threads();
      if (!s.ok()) return s;
    }
  }

  size_t snapshot_of = 0;
  bool snapshot_wanted = false;
  if (!options.stop_on.empty() || !options.snapshot_on.empty()) {
    session.set_hook([&](size_t i, const Record& r, const rec::StreamState& st) {
      Source& p = procs[i];
      if (p.snapshot_on.active() && p.snapshot_on.matches(r)) {
        snapshot_wanted = true;
        snapshot_of = i;
      }
      if (!p.stop_on.active() || !p.stop_on.matches(r)) return false;
      summary.stop_match = rec::describe_stop_match(r, st, session.trace(i), /*name_process=*/true);
      return true;
    });
  }

  const double t0 = sys::monotonic_seconds();
  double last_progress = t0, last_loss = t0, last_snapshot = 0;
  rec::DrainPacing pacing(t0);
  file::EndReason reason = file::EndReason::kInterrupted;
  for (;;) {
    uint64_t moved = 0;
    bool stopped = false;
    const double pass_start = sys::monotonic_seconds();
    const double interval = pacing.begin_pass(pass_start);
    s = session.pass(/*final=*/false, &moved, &stopped);
    if (!s.ok()) return s;
    if (kernel) {
      s = kernel->drain(/*final=*/false);
      if (!s.ok()) return s;
    }
    double now = sys::monotonic_seconds();
    if (snapshot_wanted && now - last_snapshot >= 1.0) {
      snapshot_wanted = false;
      last_snapshot = now;
      std::string name = options.output + ".snap" + std::to_string(summary.snapshots.size() + 1);
      auto snap = write_snapshot(session.trace(snapshot_of), name, options.compress);
      if (!snap.ok()) return snap.status();
      summary.snapshots.push_back(name);
    }
    const bool interrupted = options.stop && options.stop->load(std::memory_order_relaxed);
    const bool timed_out = options.duration_s > 0 && now - t0 >= options.duration_s;
    bool ended = true;
    if (stopped) {
      s = session.finish_all();
      reason = file::EndReason::kStopOn;
    } else if (session.all_finished()) {
      reason = file::EndReason::kTargetExited;  // each was drained to its end as it exited
    } else if (interrupted || timed_out) {
      s = session.pass(/*final=*/true, &moved, &stopped);
      if (s.ok() && stopped) s = session.finish_all();
      reason = stopped       ? file::EndReason::kStopOn
               : interrupted ? file::EndReason::kInterrupted
                             : file::EndReason::kDuration;
    } else {
      ended = false;
    }
    if (s.ok() && ended && kernel) s = kernel->drain(/*final=*/true);
    if (!s.ok()) return s;
    if (ended) break;
    if (options.progress && now - last_progress >= 0.25) {
      last_progress = now;
      RecordProgress pr;
      pr.seconds = now - t0;
      pr.records = session.records();
      pr.bytes = out.bytes_written();
      for (const RecordedProcess& p : session.processes()) pr.lost += p.lost;
      options.progress(pr);
    }
    if (now - last_loss >= 1.0) {
      last_loss = now;
      s = session.write_loss();
      if (s.ok() && kernel) s = kernel->refresh_threads();
      if (!s.ok()) return s;
    }
    const uint64_t rest =
        pacing.rest_us(moved > 0, session.writer_waiting(), session.quarter_ring_s(interval),
                       sys::monotonic_seconds() - pass_start);
    if (rest > 0) sleep_us(rest);
  }
  if (kernel) s = kernel->finish(&summary.kernel_pages, &summary.kernel_lost);
  if (s.ok()) s = session.write_end(reason);
  if (s.ok()) s = out.close();
  if (!s.ok()) return s;
  groups.clear();

  summary.reason = rec::end_reason_text(reason);
  summary.seconds = sys::monotonic_seconds() - t0;
  summary.records = session.records();
  summary.file_bytes = out.bytes_written();
  summary.data_bytes = out.data_bytes();
  summary.lost_no_slot = session.lost_no_slot();
  summary.lost_reclaimed = session.lost_reclaimed();
  summary.threads = session.threads();
  summary.processes = session.processes();
  return summary;
}

}  // namespace nanotrace
