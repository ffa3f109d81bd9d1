// Kernel (ftrace) records in Perfetto's own ftrace schema (protos/perfetto/trace/ftrace/ of
// Perfetto): FtraceEventBundle packets, one CPU each, so that trace processor fills its sched,
// thread_state and ftrace_event tables and the UI draws CPU tracks and thread states. Also
// the packets that go with them: the ProcessTree (threads' names and processes), the
// FtraceStats (ftrace's losses per CPU) and the SystemInfo (the recording kernel's uname).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::exporter {

// The sequence-scoped clock (ClockSnapshot ids 64-127) that trace processor gives the
// timestamps of bundles whose ftrace_clock is "global" on a sequence: the writer declares it
// in its ClockSnapshot equal to CLOCK_MONOTONIC, the clock the bundles are stamped in.
inline constexpr uint64_t kFtraceSequenceClock = 64;

class FtraceBundleWriter {
 public:
  // kernel_events: Trace::kernel_events() (a kernel record's event id indexes it).
  FtraceBundleWriter(const std::vector<EventInfo>& kernel_events, uint32_t sequence_id);
  ~FtraceBundleWriter();

  // Adds a kernel record, stamped ts (CLOCK_MONOTONIC ns), to its CPU's pending bundle;
  // appends that bundle's packet to out once it is large.
  void add(const Record& record, uint64_t ts, fmt::memory_buffer* out);
  // Appends the packets of every pending bundle.
  void flush(fmt::memory_buffer* out);

 private:
  struct Mapping;
  void flush_cpu(uint32_t cpu, fmt::memory_buffer* out);

  uint32_t sequence_id_;
  std::vector<Mapping> by_event_;
  std::vector<std::unique_ptr<fmt::memory_buffer>> pending_;  // by CPU: encoded FtraceEvents
};

// A ProcessTree packet: the trace's processes (pid, parent, name) and its user-space threads
// (tid, process, name), stamped ts.
void write_process_tree(const Trace& trace, const std::vector<ThreadStats>& threads,
                        uint32_t sequence_id, uint64_t ts, fmt::memory_buffer* out);

// An FtraceStats packet for every CPU of the kernel capture: at the start (end = false) all
// counters zero; at the end ftrace's overruns (overrun) and drops (dropped_events) as the
// file recorded them, so that trace processor's per-CPU loss statistics are theirs.
void write_ftrace_stats(const std::vector<ThreadStats>& threads, bool end, uint32_t sequence_id,
                        uint64_t ts, fmt::memory_buffer* out);

// A SystemInfo packet with the recording kernel's uname (Utsname), from which trace processor
// takes the kernel version it decodes sched_switch's prev_state by (without it, a preempted
// task shows as waking); nothing for a file recorded before the uname was stored.
void write_system_info(const Trace& trace, uint32_t sequence_id, fmt::memory_buffer* out);

}  // namespace nanotrace::exporter
