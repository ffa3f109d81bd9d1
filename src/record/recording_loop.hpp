// The one recording loop: drains the processes of a DrainSource (drain_source.hpp) into one
// trace file until the source says they are over, --stop-on matches, the duration is over
// or the caller stops it, with every feature the same for every source: kernel events,
// kernel flight windows in snapshots, --stop-on, --snapshot-on, --groups, progress, loss
// counters every second, pacing, and a final drain that accounts for every record.
//
// Pacing. Nothing tells the recorder that records arrived (a writer never makes a system
// call on its fast path), so it looks again after the time the busiest ring takes to fill a
// quarter of itself at the rate it filled since the last pass: each pass then writes about
// one chunk (few system calls per byte), and a ring never fills while the recorder sleeps
// unless the rate quadruples. No sleep while a writer waits for room; with nothing to move,
// the sleep doubles from 50 us up to 10 ms, under 1 % of a core (drain_pacing.hpp). A
// process's exit (and the source's wake_fd) ends a sleep early.
//
// Snapshots (--snapshot-on, or a source's ask): at most one a second, OUTPUT.snap1, .snap2,
// ..., each of every process still recorded and of the one whose record matched. With
// --kernel, a second ftrace instance in overwrite mode keeps the kernel's last events for
// them: each snapshot holds the last --kernel-flight-buffer per CPU, from the oldest user
// record in it on.
//
// Thread safety: runs on the calling thread; RecordOptions::stop may be set from any thread
// or a signal handler.
#pragma once

#include <string>

#include "nanotrace/record.hpp"
#include "record/drain_source.hpp"

namespace nanotrace::rec {

// Checks the options that need no process: the duration and the syntax of --stop-on and
// --snapshot-on. A source's entry point calls it before it opens or starts anything.
// Errors: kInvalidArgument.
Status check_record_options(const RecordOptions& options);

// Records `source` into options.output (a new file, mode 0600). Before the file is created,
// binds the trigger expressions to the source's initial processes and checks --groups
// against them: an error there leaves no file. Always ends the file with the final clock
// calibration, loss counts and an END chunk that says why it ended, unless writing failed
// (kIoError: what was written before stays readable). A kernel capture that cannot be set
// up is a warning in the summary; a malformed --kernel item is an error and leaves no file.
Result<RecordSummary> record_source(DrainSource& source, const RecordOptions& options);

// Removes path if it is a regular file (never a FIFO or a device such as /dev/null given as
// the output): a file for a recording that never started.
void discard_output(const std::string& path);

}  // namespace nanotrace::rec
