// In-process control of nanotrace: configuration before the first event, and groups at run
// time. Everything here is optional: without a call, the environment decides
// (NANOTRACE_MODE, NANOTRACE_BUFFER, NANOTRACE_THREADS, NANOTRACE_GROUPS, NANOTRACE_NAME,
// NANOTRACE_KEEP, NANOTRACE_CLOCK, NANOTRACE_BLOCK_TIMEOUT), and an option set here wins over
// the environment.
//
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nanotrace/abi.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

using Mode = abi::Mode;

struct Options {
  std::optional<Mode> mode;              // default kOverwrite
  std::optional<uint32_t> buffer_bytes;  // per thread, rounded up to a power of two >= 64 KiB
  std::optional<uint32_t> max_threads;   // thread slots (rings), default 256
  std::optional<std::string> groups;     // "all" (default), "io,sched", "all,-debug"
  std::optional<std::string> name;       // a name tools can find the process by
  std::optional<bool> keep_on_exit;      // keep the segment after a clean exit
  std::optional<bool> crash_handler;     // mark the segment crashed on a fatal signal
  // Block mode: how long a writer waits for the consumer before it drops and counts the
  // record (default 100 ms; 0: never wait; UINT64_MAX: as long as the consumer lives).
  std::optional<uint64_t> block_timeout_ns;
};

// Applies options. Mode, buffer size and thread count can only change before any thread has
// recorded an event (the segment is rebuilt); afterwards they give kBusy. Groups, name and
// keep_on_exit always apply.
Status configure(const Options& options);

// Enables or disables a group (as `nanotrace enable/disable` does from outside).
// An unknown group gives kNotFound.
Status set_group_enabled(std::string_view group, bool enabled);

// Path of this process's segment (e.g. /dev/shm/nanotrace-1234), empty if none.
std::string segment_path();

// Mode ring buffers use in this process.
Mode mode();

// How long the rings keep recording after a trigger matched: a number of events (all
// threads together) or a time. Both zero: freeze on the matching record itself. A record
// counts as inside the window when its thread reserves it; each thread may add the one
// record it had in flight (for a time window: stamped past the deadline if the thread was
// preempted between reserving and stamping it).
struct TriggerWindow {
  uint64_t after_events = 0;
  uint64_t after_ns = 0;
};

// Arms a trigger (syntax in nanotrace/trigger.hpp, e.g. "io:complete lat_us>1000"). When a
// matching record is written, the rings keep recording for the window, then freeze (no
// record is written or overwritten) and the segment names the matching record, until
// resume(). Also set by NANOTRACE_TRIGGER and NANOTRACE_TRIGGER_AFTER ("1000", "500us").
// Errors: kInvalidArgument (syntax), kNotFound (no such event or field).
Status arm_trigger(std::string_view expression, const TriggerWindow& window = {});
Status disarm_trigger();
// Unfreezes the rings after a trigger fired; the same trigger stays armed.
// kInvalidArgument if it has not fired.
Status resume();
// True while the rings are frozen by a trigger.
bool frozen();

}  // namespace nanotrace
