// What the recording loop (recording_loop.hpp) records: a DrainSource says which processes go
// into the trace file and when the recording is over by its own account. The loop does
// everything else, the same way for every source: it creates the file, drains the rings of
// every process the source added, captures kernel events (--kernel) and keeps a kernel flight
// window for snapshots (--snapshot-on with --kernel), evaluates --stop-on and --snapshot-on,
// writes loss counters every second, reports progress, paces its passes, and drains
// everything a final time when the recording ends.
//
// The sources:
//   - the processes named on the command line (`record PID`, `record SRC SRC...`): added at
//     start; the recording is over when every one of them has exited (process_source.cc);
//   - a command's process tree (`nanotrace run`): the command is started by start(), each
//     process image it and its descendants start is found by poll() (its segment carries the
//     session's run id); the recording is over when the command exits (command_source.cc);
//   - a node's every traced process (the fleet agent): found by poll() as they start, never
//     over on its own (interrupted by the caller), snapshots asked for by poll() when an
//     outside trigger fires.
//
// The calls, in the order the loop makes them:
//
//   initial_processes(), file_pid(), tsc_clock()   the options are checked, the file created
//   start(session)                                 once
//   { poll(session, &asks); <pass>; ended(session); <rest, woken by wake_fd()> }   repeatedly
//   finish(session, reason)                        once, before the final pass
//
// A process is "added" with ProcessSession::add or ProcessSession::scan; the session numbers
// processes in the order they were added (the file's process index) and finishes each one on
// its own when its writer goes away (drained to its end, consumer detached, and its segment
// removed if the source said the session owns it). A source never removes a process.
// Consuming or not is the source's choice when it adds a process: attached (the recorder is
// the segment's consumer; a block-mode writer waits for it and nothing is lost) or not (the
// rings are read without consuming; their writers never wait, and what they overwrite
// before a pass is counted lost: rings a process keeps as its own flight recorder).
// tests/record/recording_loop_test.cc drives the loop with a source of the fleet agent's
// shape (processes found as they start, a snapshot asked from outside, never over).
//
// Thread safety: every call is made on the loop's thread. A source may be poked from another
// thread or a signal handler only through its own atomics (`run` forwards signals that way).
#pragma once

#include <cstdint>
#include <vector>

#include "base/file_format.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"
#include "record/process_session.hpp"

namespace nanotrace::rec {

// What a source asks of the loop at a poll(), besides the processes it added.
struct SourceAsks {
  // Write a snapshot of every process being recorded now (OUTPUT.snapN, with the kernel
  // window when there is one), as a --snapshot-on match does: an outside trigger (the fleet
  // agent's). Snapshots are at most one a second, whoever asks; a request within the second
  // after the last snapshot waits for the second to pass.
  bool snapshot = false;
};

class DrainSource {
 public:
  virtual ~DrainSource() = default;

  // --- Before the file exists ------------------------------------------------------------
  // The processes start() will add, already opened and attached as consumer: the loop binds
  // --stop-on and --snapshot-on to them and checks --groups against their groups before it
  // creates the file, so that a bad option leaves no file behind. Empty for a source whose
  // processes appear later (their expressions are then only parsed up front, and a group
  // name none of them has is ignored). The pointers stay valid until start() hands the
  // traces to the session.
  virtual std::vector<const Trace*> initial_processes() const = 0;
  // The FileHeader's pid (docs/format.md: the first process's; `run`: the command's) and the
  // process whose threads the kernel capture filters on first.
  virtual uint32_t file_pid() const = 0;
  // True if the processes' records are TSC ticks, false if CLOCK_MONOTONIC nanoseconds: the
  // kernel capture runs on the same clock (docs/format.md, "Kernel events").
  virtual bool tsc_clock() const = 0;
  // True if the recording is of several processes by intent (everything but `record PID`):
  // the summary then lists each process, and a --stop-on match names its process.
  virtual bool several() const = 0;
  // True if poll() may ask for snapshots (SourceAsks::snapshot): with --kernel, the loop then
  // keeps the kernel flight window even without --snapshot-on.
  virtual bool asks_snapshots() const { return false; }

  // --- Recording -------------------------------------------------------------------------
  // Called once, after the file and the kernel capture exist: adds the initial processes to
  // the session and starts whatever the source starts (`run`: lets the command exec). An
  // error ends the recording before its first pass and is the loop's error; the file stays
  // as written so far (the caller may remove it: `run` does when the command never ran).
  virtual Status start(ProcessSession& session) = 0;
  // Called before every pass (every 50 us to 10 ms): adds the processes that appeared since
  // (a scan of /dev/shm, at the source's own pace), does what the source owes its processes
  // between passes (`run`: forwards signals to the command), and fills *asks. Must be cheap
  // when nothing changed. An error ends the recording (reason: error).
  virtual Status poll(ProcessSession& session, SourceAsks* asks) = 0;
  // Called after every pass: true once the recording is over by the source's own account
  // (its processes exited, the command exited); the file's end reason is then "target
  // exited". The loop ends on its own for the other reasons (--stop-on, --duration, the
  // caller's stop flag, an error).
  virtual bool ended(const ProcessSession& session) = 0;
  // A descriptor that turns readable when ended() may have become true (a pidfd), so that
  // the loop's rest between passes ends early; -1: none. The session's own processes wake
  // the loop when they exit without the source's help.
  virtual int wake_fd() const { return -1; }
  // Called once, when the loop has ended for `reason` and before the final pass: adds the
  // processes the final pass must still take (`run`: a last scan, after the command exited).
  // Not called when the recording failed.
  virtual Status finish(ProcessSession& session, file::EndReason reason) = 0;
};

}  // namespace nanotrace::rec
