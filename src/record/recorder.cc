// `nanotrace record`: attach as the consumer of a live process's segment and drain every
// thread's ring into a trace file until stopped, the duration is over, the target exits or a
// --stop-on expression matches.
//
// Polling. Nothing tells the recorder that records arrived (a writer never makes a system
// call on its fast path), so it looks again after the time the busiest ring takes to fill a
// quarter of itself at the rate it filled since the last pass: each pass then writes about
// one chunk (few system calls per byte), and a ring never fills while the recorder sleeps
// unless the rate quadruples. No sleep while a writer waits for room; with nothing to move,
// the sleep doubles from 50 us up to 10 ms, under 1 % of a core.
//
// With --kernel and --snapshot-on, a second ftrace instance in overwrite mode keeps the
// kernel's last events for the snapshots: each one holds the last --kernel-flight-buffer per
// CPU, from the oldest user record in it on.
#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "base/group_spec.hpp"
#include "base/output_file.hpp"
#include "base/process.hpp"
#include "kernel/kernel_capture.hpp"
#include "nanotrace/record.hpp"
#include "nanotrace/trigger.hpp"
#include "reader/trace_internals.hpp"
#include "record/drain_pacing.hpp"
#include "record/drainer.hpp"
#include "record/file_writer.hpp"
#include "record/kernel_recording.hpp"
#include "record/node_clock.hpp"
#include "record/process_session.hpp"
#include "record/record_controls.hpp"

namespace nanotrace {
namespace {

// Whether the target still runs, without reading /proc on every pass: a pidfd (polled)
// turns readable when the process exits, and also cuts a sleep short then.
class TargetWatch {
 public:
  TargetWatch(uint32_t pid, uint64_t start_time, uint64_t identity)
      : pid_(pid), start_time_(start_time), identity_(identity) {
    fd_ = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
    // Opened first, then checked: if the pid named another process by then, it is gone. The
    // pidfd's own identity is exact; a start time is shared by processes of one clock tick.
    const uint64_t watched = fd_ >= 0 && identity != 0 ? sys::pidfd_identity(fd_) : 0;
    if (watched != 0) {
      gone_ = watched != identity;
    } else if (fd_ >= 0 && !sys::process_alive(pid, start_time)) {
      gone_ = true;
    }
  }
  ~TargetWatch() {
    if (fd_ >= 0) close(fd_);
  }
  bool alive(double now) {
    if (gone_) return false;
    if (fd_ >= 0) {
      pollfd p{fd_, POLLIN, 0};
      gone_ = poll(&p, 1, 0) != 0;
    } else if (now - last_check_ >= 0.005) {  // no pidfd: /proc every few milliseconds
      last_check_ = now;
      gone_ = !sys::process_alive(pid_, start_time_, identity_);
    }
    return !gone_;
  }
  void sleep_us(uint64_t us) const {
    timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
    if (fd_ < 0 || gone_) {
      nanosleep(&ts, nullptr);
      return;
    }
    pollfd p{fd_, POLLIN, 0};
    (void)ppoll(&p, 1, &ts, nullptr);
  }

 private:
  uint32_t pid_;
  uint64_t start_time_;
  uint64_t identity_;
  int fd_ = -1;
  bool gone_ = false;
  double last_check_ = 0;
};

// What a finished file holds and what was lost, as the summary reports it.
void fill_counts(const rec::Drainer& drainer, const rec::FileWriter& out, uint32_t pid,
                 RecordSummary* summary) {
  summary->records = drainer.records();
  summary->file_bytes = out.bytes_written();
  summary->data_bytes = out.data_bytes();
  summary->lost_no_slot = drainer.lost_no_slot();
  summary->lost_reclaimed = drainer.lost_reclaimed();
  summary->threads = rec::summarize_streams(drainer.all_streams(), pid);
}

// A snapshot file: every ring as it is now, then what `extra` adds (a flight capture's
// kernel window), given the oldest user-space record's ticks in the file (0: none).
Result<RecordSummary> snapshot_into(
    Trace& trace, const std::string& output, bool compress,
    const std::function<Status(rec::FileWriter& out, uint64_t oldest_ticks)>& extra) {
  rec::FileWriter out;
  const ProcessInfo& p = trace.process();
  Status s =
      out.open(output, p.pid, p.alive ? file::FileKind::kSnapshot : file::FileKind::kRecovered,
               compress, trace.source_fd());
  if (!s.ok()) return s;
  rec::Drainer drainer(trace, out, /*consume=*/false);
  uint64_t moved = 0, oldest = UINT64_MAX;
  bool stopped = false;
  rec::RecordHook hook;
  if (extra) {
    hook = [&](const Record& r, const rec::StreamState&) {
      oldest = std::min(oldest, r.ticks);
      return false;
    };
  }
  s = drainer.write_meta(true);
  if (s.ok()) s = drainer.pass(hook, /*final=*/true, &moved, &stopped);
  if (s.ok()) s = drainer.write_loss();
  if (s.ok() && extra) s = extra(out, oldest == UINT64_MAX ? 0 : oldest);
  if (s.ok()) s = rec::write_node_chunk(out, trace);
  if (s.ok()) s = drainer.write_end(file::EndReason::kComplete);
  if (s.ok()) s = out.close();
  if (!s.ok()) return s;
  RecordSummary summary;
  summary.reason = "complete";
  fill_counts(drainer, out, p.pid, &summary);
  return summary;
}

}  // namespace

uint64_t RecordSummary::lost() const {
  uint64_t n = lost_no_slot + lost_reclaimed;
  for (const RecordedThread& t : threads) n += t.overwritten + t.dropped;
  return n;
}

Result<RecordSummary> record(const std::string& source, const RecordOptions& options) {
  if (!(options.duration_s >= 0)) {
    return Status::Invalid("--duration must be a number of seconds >= 0 (0: until stopped)");
  }
  auto opened = Trace::open(source, /*writable=*/true);
  if (!opened.ok()) return opened.status();
  Trace& trace = **opened;
  if (Status same = check_not_source(options.output, trace.source_fd()); !same.ok()) return same;
  if (trace.is_file()) return Status::Invalid(source + " is a trace file, not a live process");
  const ProcessInfo& p = trace.process();
  if (!p.alive) {
    return Status::Invalid("process " + std::to_string(p.pid) +
                           " is not running (use `nanotrace recover`)");
  }
  auto* header = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(trace));
  const uint64_t start_time = header->proc_start_time;
  const uint64_t identity = header->proc_identity;
  rec::BoundTrigger stop_on, snapshot_on;
  if (!options.stop_on.empty()) {
    Status s = stop_on.init(options.stop_on, trace);
    if (!s.ok()) return Status(s.code(), "--stop-on: " + s.message());
  }
  if (!options.snapshot_on.empty()) {
    Status s = snapshot_on.init(options.snapshot_on, trace);
    if (!s.ok()) return Status(s.code(), "--snapshot-on: " + s.message());
  }
  std::vector<rec::SlotAtAttach> at_attach = rec::slots_at_attach(trace);
  Status s = trace.attach_consumer();
  if (!s.ok()) return s;
  rec::GroupGuard groups;
  if (!options.groups.empty()) {
    s = groups.apply(trace, options.groups);
    if (!s.ok()) return s;
  }
  rec::FileWriter out;
  s = out.open(options.output, p.pid, file::FileKind::kRecording, options.compress,
               trace.source_fd());
  if (!s.ok()) return s;
  rec::Drainer drainer(trace, out, /*consume=*/true, std::move(at_attach));
  s = drainer.write_meta(true);
  if (!s.ok()) return s;

  RecordSummary summary;
  std::unique_ptr<rec::KernelRecording> kernel;
  if (!options.kernel.empty()) {
    std::string warning;
    auto k = rec::KernelRecording::start(options.kernel, options.kernel_buffer_kb, p.pid,
                                         p.clock == abi::ClockKind::kTsc, out, &warning);
    if (!k.ok()) return k.status();
    kernel = std::move(*k);
    if (!warning.empty()) summary.warnings.push_back(warning);
  }
  // Snapshots carry the kernel's last events: a second instance of the same events in
  // overwrite mode, read only when a snapshot is written (the recording drains the first).
  std::unique_ptr<kernel::KernelCapture> flight;
  if (kernel && snapshot_on.active()) {
    kernel::CaptureOptions f;
    f.groups = options.kernel;
    f.pid = p.pid;
    f.clock =
        p.clock == abi::ClockKind::kTsc ? file::KernelClock::kTsc : file::KernelClock::kMonotonic;
    f.buffer_kb = options.kernel_flight_buffer_kb;
    f.flight = true;
    auto started = kernel::KernelCapture::start(f);
    if (started.ok()) {
      flight = std::move(*started);
    } else {
      summary.warnings.push_back("snapshots without kernel events: " + started.status().message());
    }
  }
  bool snapshot_wanted = false;
  const bool walk_hook = stop_on.active() || snapshot_on.active();
  rec::RecordHook hook;
  if (walk_hook) {
    hook = [&](const Record& r, const rec::StreamState& st) {
      if (snapshot_on.active() && snapshot_on.matches(r)) snapshot_wanted = true;
      if (stop_on.active() && stop_on.matches(r)) {
        summary.stop_match = rec::describe_stop_match(r, st, trace, /*name_process=*/false);
        return true;
      }
      return false;
    };
  }

  const double t0 = sys::monotonic_seconds();
  double last_progress = t0, last_loss = t0, last_snapshot = 0;
  TargetWatch target(p.pid, start_time, identity);
  rec::DrainPacing pacing(t0);
  file::EndReason reason = file::EndReason::kInterrupted;
  for (;;) {
    uint64_t moved = 0;
    bool stopped = false;
    const double pass_start = sys::monotonic_seconds();
    const double interval = pacing.begin_pass(pass_start);
    s = drainer.pass(hook, /*final=*/false, &moved, &stopped);
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
      SnapshotKernel window;
      std::function<Status(rec::FileWriter&, uint64_t)> kernel_window;
      if (flight) {
        kernel_window = [&](rec::FileWriter& file, uint64_t oldest_ticks) -> Status {
          auto w = flight->read_window(oldest_ticks);
          if (!w.ok()) return w.status();
          window.pages = w->pages;
          window.lost = w->lost;
          return rec::write_kernel_window(*w, file);
        };
      }
      auto snap = snapshot_into(trace, name, options.compress, kernel_window);
      if (!snap.ok()) return snap.status();
      summary.snapshots.push_back(name);
      if (flight) summary.snapshot_kernel.push_back(window);
    }
    if (stopped) {
      reason = file::EndReason::kStopOn;
      break;
    }
    bool alive = __atomic_load_n(&header->state, __ATOMIC_ACQUIRE) ==
                     static_cast<uint32_t>(abi::ProcessState::kRunning) &&
                 target.alive(now);
    bool interrupted = options.stop && options.stop->load(std::memory_order_relaxed);
    bool timed_out = options.duration_s > 0 && now - t0 >= options.duration_s;
    if (!alive || interrupted || timed_out) {
      // Take what the rings still hold (a dead writer's tail, or the last records), and
      // account for every record so the counts and the consumer position are exact.
      for (int i = 0; i < 1000; ++i) {
        s = drainer.pass(hook, /*final=*/true, &moved, &stopped);
        if (!s.ok()) return s;
        if (moved == 0 || stopped) break;
      }
      if (kernel) {
        s = kernel->drain(/*final=*/true);
        if (!s.ok()) return s;
      }
      reason = stopped       ? file::EndReason::kStopOn
               : !alive      ? file::EndReason::kTargetExited
               : interrupted ? file::EndReason::kInterrupted
                             : file::EndReason::kDuration;
      break;
    }
    if (options.progress && now - last_progress >= 0.25) {
      last_progress = now;
      RecordProgress pr;
      pr.seconds = now - t0;
      pr.records = drainer.records();
      pr.bytes = out.bytes_written();
      RecordSummary tmp;
      tmp.threads = rec::summarize_streams(drainer.all_streams(), p.pid);
      tmp.lost_no_slot = drainer.lost_no_slot();
      tmp.lost_reclaimed = drainer.lost_reclaimed();
      pr.lost = tmp.lost();
      options.progress(pr);
    }
    if (now - last_loss >= 1.0) {
      last_loss = now;
      s = drainer.write_loss();
      if (!s.ok()) return s;
      if (kernel) {
        s = kernel->refresh_threads();
        if (!s.ok()) return s;
      }
      if (flight) {
        s = flight->refresh_threads();
        if (!s.ok()) return s;
      }
    }
    const uint64_t busiest = drainer.max_stream_moved();
    const double quarter_s =
        busiest > 0 ? static_cast<double>(drainer.ring_size()) / 4 * interval / busiest : 0;
    const uint64_t rest = pacing.rest_us(busiest > 0, drainer.writer_waiting(), quarter_s,
                                         sys::monotonic_seconds() - pass_start);
    if (rest > 0) target.sleep_us(rest);
  }
  s = drainer.write_meta(true);  // the latest clock calibration
  if (s.ok()) s = drainer.write_loss();
  if (s.ok() && kernel) s = kernel->finish(&summary.kernel_pages, &summary.kernel_lost);
  flight.reset();  // its instance goes with the recording's
  if (s.ok()) s = rec::write_node_chunk(out, trace);
  if (s.ok()) s = drainer.write_end(reason);
  if (s.ok()) s = out.close();
  if (!s.ok()) return s;
  trace.detach_consumer();

  summary.reason = rec::end_reason_text(reason);
  summary.seconds = sys::monotonic_seconds() - t0;
  fill_counts(drainer, out, p.pid, &summary);
  return summary;
}

Result<RecordSummary> write_snapshot(Trace& trace, const std::string& output, bool compress) {
  return snapshot_into(trace, output, compress, nullptr);
}

}  // namespace nanotrace
