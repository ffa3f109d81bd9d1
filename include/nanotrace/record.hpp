// Writing trace files: `nanotrace record` (drain a live process's rings into a file as its
// consumer), `snapshot` (a consistent copy of the rings now, without consuming), `recover`
// (every complete record a dead process left in its segment) and `clean` (remove segments
// of processes that are gone). The file format is described in docs/format.md ("Trace
// file"); Trace::open reads the files back.
//
// Thread safety: each call runs on the calling thread; record() may be stopped from a signal
// handler or another thread through RecordOptions::stop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

// What one thread generation contributed to a trace file.
struct RecordedThread {
  uint32_t pid = 0;  // its process's
  uint32_t slot = 0;
  uint32_t generation = 0;
  uint32_t tid = 0;
  std::string name;
  uint64_t records = 0;         // records written to the file
  uint64_t overwritten = 0;     // records the writer overwrote before they could be copied
  uint64_t dropped = 0;         // records the writer dropped while the file was written
  uint64_t reclaimed = 0;       // unread records lost when the thread's slot was reused
  uint64_t corrupt_blocks = 0;  // damaged blocks skipped (their records count as overwritten)
};

// What one process image contributed to a trace file of several processes.
struct RecordedProcess {
  uint32_t pid = 0;
  uint32_t parent_pid = 0;
  std::string name;
  uint64_t records = 0;
  uint64_t lost = 0;
};

struct RecordProgress {
  double seconds = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;  // file bytes written
  uint64_t lost = 0;
};

struct RecordOptions {
  std::string output;
  double duration_s = 0;            // 0: until stopped or the target exits
  std::vector<std::string> groups;  // enable exactly these groups while recording
                                    // (items such as "all", "-debug" allowed)
  bool compress = false;            // zstd per chunk
  std::string stop_on;              // trigger expression: stop after the matching record
  std::string snapshot_on;          // trigger expression: write OUTPUT.snapN when matched
  // Kernel events to record alongside (root, tracefs): block, io_uring, sched, syscalls, any
  // ftrace system, or system:event. A malformed item is an error; a capture that cannot be
  // set up (not root, no tracefs, an event this kernel lacks) is a warning in the summary
  // and the user-space recording goes on.
  std::vector<std::string> kernel;
  uint32_t kernel_buffer_kb = 4096;  // ftrace's buffer per CPU (the kernel rounds to pages)
  // With kernel and snapshot_on: the per-CPU buffer of the overwriting instance whose last
  // events each snapshot takes (its size bounds the kernel history a snapshot holds).
  uint32_t kernel_flight_buffer_kb = 4096;
  const std::atomic<bool>* stop = nullptr;  // set to stop (e.g. from a SIGINT handler)
  // Called about 4 times a second while recording (e.g. to print progress).
  std::function<void(const RecordProgress&)> progress;
};

// The kernel events of one snapshot (record with kernel and snapshot_on).
struct SnapshotKernel {
  uint64_t pages = 0;  // ftrace sub-buffers in the snapshot
  uint64_t lost = 0;   // kernel events ftrace overwrote or dropped since the previous snapshot
};

struct RecordSummary {
  std::string reason;  // why the recording ended: "interrupted", "target exited", ...
  double seconds = 0;
  uint64_t records = 0;
  uint64_t file_bytes = 0;
  uint64_t data_bytes = 0;  // raw ring bytes
  uint64_t lost_no_slot = 0;
  uint64_t lost_reclaimed = 0;
  std::vector<RecordedThread> threads;
  std::string stop_match;  // with stop_on: which record matched
  // A duration trigger's pairing (--stop-on, --snapshot-on): "--stop-on: N pairs, ...".
  std::vector<std::string> trigger_counts;
  std::vector<std::string> snapshots;           // with snapshot_on: files written
  std::vector<SnapshotKernel> snapshot_kernel;  // with kernel too: per snapshot
  std::vector<std::string> warnings;            // e.g. why kernel events were not recorded
  uint64_t kernel_pages = 0;                    // ftrace sub-buffers stored (with kernel)
  uint64_t kernel_lost = 0;                     // kernel events overwritten or dropped by ftrace
  // record_processes: each process recorded, in the file's order (empty for one process).
  std::vector<RecordedProcess> processes;
  uint64_t lost() const;
};

// Records the process `source` (pid or name:NAME) into options.output as its consumer
// (block mode waits for it: nothing is lost). Ends on *options.stop, the duration, the
// target's exit (after draining what is left) or a --stop-on match; always ends the file
// with loss counts and an END chunk. A bad source or option is an error before anything
// starts, and leaves no file. Errors: kBusy (another consumer is attached),
// kNotFound, kInvalidArgument (unknown group, bad expression), kIoError (the file could not
// be written: what was written before stays readable; the summary is lost).
Result<RecordSummary> record(const std::string& source, const RecordOptions& options);

// Records several live processes into one trace file of several processes (one process
// index each, in the order of `sources`), with record()'s options and guarantees; each
// source is a pid or name:NAME, and name:NAME takes every live process of that name (a
// process named twice is recorded once). One process in all is record(source). Every source
// is checked (alive, not consumed by another recorder, same clock) before anything starts:
// a bad one is the error. A process that exits is drained to its end and the others go on;
// the recording ends when all have exited (or as record() ends). --stop-on stops all of
// them at the first match in any; --snapshot-on snapshots every process still recorded (and
// the one that matched) into one file of several processes, with the kernel window when
// kernel events are recorded. Errors as record().
Result<RecordSummary> record_processes(const std::vector<std::string>& sources,
                                       const RecordOptions& options);

// Writes every ring of `trace` as it is now into output, without consuming: only records
// validated intact are kept. Works on a live process (snapshot) and on the segment of a
// dead one (recover). Errors: kIoError.
Result<RecordSummary> write_snapshot(Trace& trace, const std::string& output, bool compress);

// `nanotrace run`: starts a command with the I/O interposer preloaded and records every
// process it and its descendants start (each process image has its own segment, found by the
// session's NANOTRACE_RUN_ID) into one trace file, until the command exits or --stop-on
// matches (the command then runs on, untraced, and run still waits for it).
struct RunOptions {
  std::string output;
  std::vector<std::string> command;  // argv; command[0] is looked up in PATH
  std::string interposer;            // path of libnanotrace_io.so
  bool compress = false;
  // Kernel events to record alongside, as RecordOptions::kernel; the events that name a
  // thread are filtered to the threads of the command's processes as they are found.
  std::vector<std::string> kernel;
  uint32_t kernel_buffer_kb = 4096;
  // As RecordOptions: triggers evaluated on the records of every process of the command
  // (an expression is bound to each process's events as it is found; a process whose events
  // do not fit it never matches), the flight buffer of the snapshots' kernel window, and
  // progress reports.
  std::string stop_on;
  std::string snapshot_on;
  uint32_t kernel_flight_buffer_kb = 4096;
  std::function<void(const RecordProgress&)> progress;
  // A signal number to pass on to the command (set from a signal handler); reset once sent.
  std::atomic<int>* forward_signal = nullptr;
};

struct RunSummary {
  uint32_t pid = 0;   // the command's
  int exit_code = 0;  // the command's exit status, or 128 + the signal that killed it
  int killed_by = 0;  // that signal, or 0
  bool core_dumped = false;
  std::string reason;  // why the recording ended: "target exited" (the command), ...
  double seconds = 0;  // of recording
  uint64_t records = 0;
  uint64_t file_bytes = 0;
  uint64_t lost = 0;
  std::vector<RecordedProcess> processes;
  std::vector<std::string> warnings;            // e.g. why kernel events were not recorded
  uint64_t kernel_pages = 0;                    // ftrace sub-buffers stored (with kernel)
  uint64_t kernel_lost = 0;                     // kernel events overwritten or dropped by ftrace
  std::string stop_match;                       // as RecordSummary
  std::vector<std::string> trigger_counts;      // as RecordSummary
  std::vector<std::string> snapshots;           // as RecordSummary
  std::vector<SnapshotKernel> snapshot_kernel;  // as RecordSummary
};

// Errors: kNotFound (the command was not found: a shell would exit 127), kInvalidArgument
// (no command, the interposer is missing, a bad expression), kIoError (the file could not be
// written; the command is then stopped with SIGTERM).
Result<RunSummary> run_command(const RunOptions& options);

// A segment in /dev/shm whose process is gone.
struct StaleSegment {
  std::string path;
  uint32_t pid = 0;
  std::string name;
  uint64_t bytes = 0;
  std::string error;  // non-empty if it could not be removed
};
// Finds (and unless dry_run removes) segments of processes that are gone: the pid is dead or
// belongs to another process (start time differs). A live process's segment is never
// touched; an unreadable segment is removed only if its pid is dead.
std::vector<StaleSegment> clean_segments(bool dry_run);

// A tracefs instance a recorder with --kernel left behind (it was killed).
struct StaleKernelInstance {
  std::string name;   // under /sys/kernel/tracing/instances
  uint32_t pid = 0;   // the recorder's
  std::string error;  // non-empty if it could not be removed
};
// Finds (and unless dry_run removes) tracefs instances of recorders that are gone.
std::vector<StaleKernelInstance> clean_kernel_instances(bool dry_run);

}  // namespace nanotrace
