// Which ftrace events `--kernel GROUPS` means, and how each is narrowed to the traced
// process. A group is `block`, `io_uring`, `sched` (switches, wakeups, forks and exits of the
// traced process's threads), `syscalls` (of the traced process), any other ftrace system
// (all its events), or an explicit `system:event`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::kernel {

// How an event is filtered to the traced process's threads.
enum class PidFilter {
  kNone,        // every occurrence (block and io_uring complete outside the process)
  kCommonPid,   // the thread the event ran in (syscalls)
  kSwitch,      // sched_switch: either side of the switch
  kPidField,    // the event's own `pid` field (wakeups, exit)
  kForkParent,  // sched_process_fork: parent_pid
};

struct EventSpec {
  std::string system;
  std::string event;
  PidFilter filter = PidFilter::kNone;
};

// Splits and checks the GROUPS items against the events this kernel has (tracefs must be
// mounted). Errors: kInvalidArgument (malformed item), kNotFound (no such system or event).
Result<std::vector<EventSpec>> resolve_groups(const std::vector<std::string>& groups);

// The ftrace filter expression restricting spec to the threads `tids`, or "" for none (no
// filter wanted, or too many threads for one filter page).
std::string pid_filter(const EventSpec& spec, const std::vector<uint32_t>& tids);

}  // namespace nanotrace::kernel
