// The one recording loop (see recording_loop.hpp).
#include "record/recording_loop.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <memory>

#include "base/clock.hpp"
#include "base/group_spec.hpp"
#include "kernel/kernel_capture.hpp"
#include "nanotrace/trigger.hpp"
#include "record/drain_pacing.hpp"
#include "record/kernel_recording.hpp"
#include "record/record_controls.hpp"
#include "record/snapshot_writer.hpp"

namespace nanotrace {

uint64_t RecordSummary::lost() const {
  uint64_t n = lost_no_slot + lost_reclaimed;
  for (const RecordedThread& t : threads) n += t.overwritten + t.dropped;
  return n;
}

namespace rec {
namespace {

// How a recording ended, as the summary says it.
const char* end_reason_text(file::EndReason reason) {
  static const char* kReasons[] = {"complete",      "interrupted",     "target exited",
                                   "duration over", "stop-on matched", "error"};
  const auto i = static_cast<uint32_t>(reason);
  return i < sizeof(kReasons) / sizeof(kReasons[0]) ? kReasons[i] : "unknown";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& w : items) out += (out.empty() ? "" : ",") + w;
  return out;
}

class RecordingLoop {
 public:
  RecordingLoop(DrainSource& source, const RecordOptions& options)
      : source_(source), options_(options), session_(out_) {}

  Result<RecordSummary> run();

 private:
  Status check_initial_processes() const;
  Status open();
  Status start_kernel();
  Status adopt_new_processes();
  bool on_record(size_t index, const Record& r, const StreamState& st);
  std::string duration_match(size_t index, const DurationWatch& watch) const;
  bool age_duration_triggers(uint64_t ticks);
  void note_duration_counts();
  uint64_t clock_ticks_now() const;
  Status record_until_over(file::EndReason* reason);
  bool over(bool stopped, double now, file::EndReason* reason);
  Status snapshot(double now);
  void report_progress(double now);
  Status now_and_then(double now);
  void rest(uint64_t us) const;
  Status end(file::EndReason reason);
  void fill_counts(RecordSummary* summary) const;

  DrainSource& source_;
  const RecordOptions& options_;
  FileWriter out_;
  ProcessSession session_;
  // After the session: the groups are restored while its traces are still open.
  std::vector<std::unique_ptr<GroupGuard>> groups_;
  std::vector<BoundTrigger> stop_on_, snapshot_on_;  // by process index
  std::vector<bool> matched_;                        // by index: --snapshot-on matched since
  std::unique_ptr<KernelRecording> kernel_;
  std::unique_ptr<kernel::KernelCapture> flight_;  // the kernel window of snapshots
  RecordSummary summary_;
  size_t adopted_ = 0;  // processes of the session set up (groups, triggers, kernel filters)
  bool snapshot_wanted_ = false;
  double t0_ = 0, last_progress_ = 0, last_loss_ = 0, last_threads_ = 0, last_snapshot_ = 0;
};

Result<RecordSummary> RecordingLoop::run() {
  Status s = check_initial_processes();
  if (s.ok()) s = open();
  if (!s.ok()) return s;
  file::EndReason reason = file::EndReason::kInterrupted;
  s = record_until_over(&reason);
  if (s.ok()) s = end(reason);
  if (!s.ok()) return s;
  return std::move(summary_);
}

// What can be checked before the file exists: the expressions bind to each process's
// events, and every group named exists in some process.
Status RecordingLoop::check_initial_processes() const {
  std::vector<std::string> known_groups;
  for (const Trace* t : source_.initial_processes()) {
    for (const auto& [option, text] :
         {std::pair<const char*, const std::string&>{"--stop-on", options_.stop_on},
          {"--snapshot-on", options_.snapshot_on}}) {
      BoundTrigger trigger;
      Status s = text.empty() ? Status::Ok() : trigger.init(text, *t);
      if (!s.ok()) return Status(s.code(), std::string(option) + ": " + s.message());
    }
    for (const GroupInfo& g : t->groups()) known_groups.push_back(g.name);
  }
  if (options_.groups.empty() || source_.initial_processes().empty()) return Status::Ok();
  return validate_group_spec(joined(options_.groups), known_groups);
}

// The file, the kernel capture (before the source starts: a command's first I/O is seen),
// then the source's processes.
Status RecordingLoop::open() {
  Status s =
      out_.open(options_.output, source_.file_pid(), file::FileKind::kRecording, options_.compress);
  if (!s.ok()) return s;
  s = start_kernel();
  if (!s.ok()) {
    (void)out_.close();
    discard_output(options_.output);
    return s;
  }
  if (!options_.stop_on.empty() || !options_.snapshot_on.empty()) {
    session_.set_hook(
        [this](size_t i, const Record& r, const StreamState& st) { return on_record(i, r, st); });
  }
  s = source_.start(session_);
  return s.ok() ? adopt_new_processes() : s;
}

Status RecordingLoop::start_kernel() {
  if (options_.kernel.empty()) return Status::Ok();
  std::string warning;
  auto k = KernelRecording::start(options_.kernel, options_.kernel_buffer_kb, source_.file_pid(),
                                  source_.tsc_clock(), out_, &warning);
  if (!k.ok()) return k.status();
  kernel_ = std::move(*k);
  if (!warning.empty()) summary_.warnings.push_back(warning);
  if (!kernel_ || (options_.snapshot_on.empty() && !source_.asks_snapshots())) {
    return Status::Ok();
  }
  // Snapshots carry the kernel's last events: a second instance of the same events in
  // overwrite mode, read only when a snapshot is written (the recording drains the first).
  kernel::CaptureOptions f;
  f.groups = options_.kernel;
  f.pid = source_.file_pid();
  f.clock = source_.tsc_clock() ? file::KernelClock::kTsc : file::KernelClock::kMonotonic;
  f.buffer_kb = options_.kernel_flight_buffer_kb;
  f.flight = true;
  auto started = kernel::KernelCapture::start(f);
  if (started.ok()) {
    flight_ = std::move(*started);
  } else {
    summary_.warnings.push_back("snapshots without kernel events: " + started.status().message());
  }
  return Status::Ok();
}

// Sets up each process the source added since the last call: its groups, its triggers, and
// the kernel filters that let its threads' events through.
Status RecordingLoop::adopt_new_processes() {
  if (adopted_ == session_.size()) return Status::Ok();
  for (; adopted_ < session_.size(); ++adopted_) {
    Trace& t = session_.trace(adopted_);
    if (!options_.groups.empty()) {
      groups_.push_back(std::make_unique<GroupGuard>());
      if (Status s = groups_.back()->apply(t, options_.groups); !s.ok()) return s;
    }
    stop_on_.emplace_back();
    snapshot_on_.emplace_back();
    matched_.push_back(false);
    // Checked up front for the initial processes; a later one whose events do not fit the
    // expression (another program of a command's tree) just never matches.
    if (!options_.stop_on.empty()) (void)stop_on_.back().init(options_.stop_on, t);
    if (!options_.snapshot_on.empty()) (void)snapshot_on_.back().init(options_.snapshot_on, t);
    if (kernel_) kernel_->follow(t.process().pid);
    if (flight_) flight_->follow(t.process().pid);
  }
  Status s = kernel_ ? kernel_->refresh_threads() : Status::Ok();
  if (s.ok() && flight_) s = flight_->refresh_threads();
  return s;
}

bool RecordingLoop::on_record(size_t index, const Record& r, const StreamState& st) {
  if (snapshot_on_[index].active() && snapshot_on_[index].matches(r, st)) {
    snapshot_wanted_ = true;
    matched_[index] = true;
  }
  if (!stop_on_[index].active() || !stop_on_[index].matches(r, st)) return false;
  summary_.stop_match = stop_on_[index].duration()
                            ? duration_match(index, *stop_on_[index].duration())
                            : describe_stop_match(r, st, session_.trace(index), source_.several());
  return true;
}

// The recorded processes' clock now (they share the recording's: TSC or monotonic).
uint64_t RecordingLoop::clock_ticks_now() const {
  if (source_.tsc_clock()) return __rdtsc();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string RecordingLoop::duration_match(size_t index, const DurationWatch& watch) const {
  return watch.describe() +
         (source_.several() ? " of process " + std::to_string(session_.trace(index).process().pid)
                            : std::string());
}

// Duration triggers whose operations were open past their threshold at `ticks` (the start of
// the pass that just ended): a --snapshot-on match asks for a snapshot, a --stop-on match
// stops the recording.
bool RecordingLoop::age_duration_triggers(uint64_t ticks) {
  bool stop = false;
  for (size_t i = 0; i < session_.size() && i < stop_on_.size(); ++i) {
    if (DurationWatch* w = snapshot_on_[i].duration(); w != nullptr && w->age(ticks)) {
      snapshot_wanted_ = true;
      matched_[i] = true;
    }
    if (DurationWatch* w = stop_on_[i].duration(); !stop && w != nullptr && w->age(ticks)) {
      summary_.stop_match = duration_match(i, *w);
      stop = true;
    }
  }
  return stop;
}

void RecordingLoop::note_duration_counts() {
  for (size_t i = 0; i < stop_on_.size(); ++i) {
    const std::string process =
        source_.several() ? " (process " + std::to_string(session_.trace(i).process().pid) + ")"
                          : "";
    if (DurationWatch* w = stop_on_[i].duration()) {
      summary_.trigger_counts.push_back("--stop-on" + process + ": " + w->counts());
    }
    if (DurationWatch* w = snapshot_on_[i].duration()) {
      summary_.trigger_counts.push_back("--snapshot-on" + process + ": " + w->counts());
    }
  }
}

Status RecordingLoop::record_until_over(file::EndReason* reason) {
  t0_ = last_progress_ = last_loss_ = last_threads_ = sys::monotonic_seconds();
  DrainPacing pacing(t0_);
  for (;;) {
    SourceAsks asks;
    Status s = source_.poll(session_, &asks);
    if (s.ok()) s = adopt_new_processes();
    if (!s.ok()) return s;
    snapshot_wanted_ = snapshot_wanted_ || asks.snapshot;
    const double pass_start = sys::monotonic_seconds();
    const uint64_t pass_ticks = clock_ticks_now();
    const double interval = pacing.begin_pass(pass_start);
    uint64_t moved = 0;
    bool stopped = false;
    s = session_.pass(/*final=*/false, &moved, &stopped);
    if (s.ok() && !stopped) stopped = age_duration_triggers(pass_ticks);
    if (s.ok() && kernel_) s = kernel_->drain(/*final=*/false);
    if (!s.ok()) return s;
    const double now = sys::monotonic_seconds();
    if (snapshot_wanted_ && now - last_snapshot_ >= 1.0) {
      if (s = snapshot(now); !s.ok()) return s;
    }
    if (over(stopped, now, reason)) return Status::Ok();
    report_progress(now);
    if (s = now_and_then(now); !s.ok()) return s;
    const uint64_t rest_us =
        pacing.rest_us(moved > 0, session_.writer_waiting(), session_.quarter_ring_s(interval),
                       sys::monotonic_seconds() - pass_start);
    if (rest_us > 0) rest(rest_us);
  }
}

bool RecordingLoop::over(bool stopped, double now, file::EndReason* reason) {
  if (stopped) {
    *reason = file::EndReason::kStopOn;
  } else if (source_.ended(session_)) {
    *reason = file::EndReason::kTargetExited;
  } else if (options_.stop && options_.stop->load(std::memory_order_relaxed)) {
    *reason = file::EndReason::kInterrupted;
  } else if (options_.duration_s > 0 && now - t0_ >= options_.duration_s) {
    *reason = file::EndReason::kDuration;
  } else {
    return false;
  }
  return true;
}

// OUTPUT.snapN of every process still recorded, and of those whose records matched (one may
// have exited in the same pass), with the flight capture's kernel window.
Status RecordingLoop::snapshot(double now) {
  snapshot_wanted_ = false;
  last_snapshot_ = now;
  std::vector<Trace*> traces;
  for (size_t i = 0; i < session_.size(); ++i) {
    if (!session_.finished(i) || matched_[i]) traces.push_back(&session_.trace(i));
    matched_[i] = false;
  }
  if (traces.empty()) return Status::Ok();
  const std::string name =
      options_.output + ".snap" + std::to_string(summary_.snapshots.size() + 1);
  auto snap = write_snapshot_of(traces, name, options_.compress, flight_.get());
  if (!snap.ok()) return snap.status();
  summary_.snapshots.push_back(name);
  if (flight_) summary_.snapshot_kernel.push_back({snap->kernel_pages, snap->kernel_lost});
  return Status::Ok();
}

void RecordingLoop::report_progress(double now) {
  if (!options_.progress || now - last_progress_ < 0.25) return;
  last_progress_ = now;
  RecordSummary counts;
  fill_counts(&counts);
  RecordProgress p;
  p.seconds = now - t0_;
  p.records = counts.records;
  p.bytes = counts.file_bytes;
  p.lost = counts.lost();
  options_.progress(p);
}

// What is due now and then: the kernel filters follow the processes' new threads (about
// every 0.2 s), and the writers' loss counters go into the file (about every second).
Status RecordingLoop::now_and_then(double now) {
  if (now - last_threads_ >= 0.2) {
    last_threads_ = now;
    Status s = kernel_ ? kernel_->refresh_threads() : Status::Ok();
    if (s.ok() && flight_) s = flight_->refresh_threads();
    if (!s.ok()) return s;
  }
  if (now - last_loss_ < 1.0) return Status::Ok();
  last_loss_ = now;
  return session_.write_loss();
}

// Sleeps us microseconds, or less if a process exits (or the source's descriptor turns
// readable: a command's exit).
void RecordingLoop::rest(uint64_t us) const {
  std::vector<pollfd> fds;
  for (int fd : session_.exit_fds()) fds.push_back({fd, POLLIN, 0});
  if (source_.wake_fd() >= 0) fds.push_back({source_.wake_fd(), POLLIN, 0});
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  (void)ppoll(fds.data(), fds.size(), &ts, nullptr);
}

// Takes what the rings still hold (a dead writer's tail, or the last records), accounting
// for every record so the counts and the consumer positions are exact; after a --stop-on
// match, nothing more. Then the kernel's last events and the END chunk.
Status RecordingLoop::end(file::EndReason reason) {
  Status s = source_.finish(session_, reason);
  if (s.ok()) s = adopt_new_processes();
  if (s.ok() && reason == file::EndReason::kStopOn) {
    s = session_.finish_all();
  } else if (s.ok()) {
    uint64_t moved = 0;
    bool stopped = false;
    s = session_.pass(/*final=*/true, &moved, &stopped);
    if (s.ok() && stopped) {
      s = session_.finish_all();
      reason = file::EndReason::kStopOn;
    }
  }
  if (s.ok() && kernel_) s = kernel_->drain(/*final=*/true);
  if (s.ok() && kernel_) s = kernel_->finish(&summary_.kernel_pages, &summary_.kernel_lost);
  flight_.reset();  // its instance goes with the recording's
  if (s.ok()) s = session_.write_end(reason);
  if (s.ok()) s = out_.close();
  if (!s.ok()) return s;
  note_duration_counts();
  groups_.clear();
  summary_.reason = end_reason_text(reason);
  summary_.seconds = sys::monotonic_seconds() - t0_;
  fill_counts(&summary_);
  return Status::Ok();
}

void RecordingLoop::fill_counts(RecordSummary* summary) const {
  summary->records = session_.records();
  summary->file_bytes = out_.bytes_written();
  summary->data_bytes = out_.data_bytes();
  summary->lost_no_slot = session_.lost_no_slot();
  summary->lost_reclaimed = session_.lost_reclaimed();
  summary->threads = session_.threads();
  if (source_.several()) summary->processes = session_.processes();
}

}  // namespace

Status check_record_options(const RecordOptions& options) {
  if (!(options.duration_s >= 0)) {
    return Status::Invalid("--duration must be a number of seconds >= 0 (0: until stopped)");
  }
  for (const auto& [option, text] :
       {std::pair<const char*, const std::string&>{"--stop-on", options.stop_on},
        {"--snapshot-on", options.snapshot_on}}) {
    if (text.empty()) continue;
    auto parsed = Trigger::parse(text);
    if (!parsed.ok()) {
      return Status(parsed.status().code(), std::string(option) + ": " + parsed.status().message());
    }
  }
  return Status::Ok();
}

Result<RecordSummary> record_source(DrainSource& source, const RecordOptions& options) {
  RecordingLoop loop(source, options);
  return loop.run();
}

void discard_output(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
}

}  // namespace rec
}  // namespace nanotrace
