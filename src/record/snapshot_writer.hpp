// A snapshot file: the rings of one or more live processes as they are now, copied without
// consuming (only records validated intact are kept), and, for a recording's snapshot with
// kernel events, the window its flight capture holds (docs/format.md, "Kernel events").
// `nanotrace snapshot` and `recover` write one of a single process; the recording loop writes
// one of every process it records at each --snapshot-on match. Internal header.
#pragma once

#include <string>
#include <vector>

#include "base/node_identity.hpp"
#include "kernel/kernel_capture.hpp"
#include "nanotrace/record.hpp"
#include "record/clock_sync.hpp"

namespace nanotrace::rec {

// Writes `traces` (process index = position; one trace is the one-process file) into output;
// with flight, then the kernel's last events from the oldest user record in the file on
// (summary.kernel_pages and kernel_lost say what the window held). The FileHeader's pid and
// kind are the first trace's (a snapshot of a live process, a recovery of a dead one).
// sync and node: the clock-sync view and this machine's identity for the NODE chunk, if the
// caller holds them (node_payload). Errors: kIoError.
Result<RecordSummary> write_snapshot_of(const std::vector<Trace*>& traces,
                                        const std::string& output, bool compress,
                                        kernel::KernelCapture* flight,
                                        const ClockSync* sync = nullptr,
                                        const sys::NodeIdentity* node = nullptr);

}  // namespace nanotrace::rec
