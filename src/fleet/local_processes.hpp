// The traced processes of one node, as the fleet agent keeps them: found in /dev/shm as they
// start, each opened for control (nanotrace/controller.hpp), and watched for a trigger that
// fires without polling: the agent sleeps in futex_waitv on every process's trigger_state word
// (the runtime wakes it when a trigger fires or the rings freeze, docs/format.md "Triggers")
// plus a word of its own that its other threads use to wake it. So an idle agent costs one
// wake-up per scan interval, whatever the number of processes.
//
// Thread safety: one thread (the agent's watcher) uses it, except kick(), callable anywhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nanotrace/controller.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

struct LocalProcess {
  uint32_t pid = 0;
  std::string name;
  std::string segment;
  std::unique_ptr<Controller> control;
  abi::TriggerState seen = abi::TriggerState::kNone;    // as of the last look
  bool frozen_by_agent = false;                         // our freeze request froze it
  std::atomic<uint64_t> arms{0}, fires{0}, freezes{0};  // read by the metrics thread
};

// Health of one process's rings, for status and metrics.
struct RingHealth {
  uint32_t threads = 0;
  uint64_t records = 0;            // written since the process started
  uint64_t overwritten_bytes = 0;  // ring bytes written over (history no longer held)
  uint64_t dropped = 0;            // records dropped by writers
  uint64_t lost_no_slot = 0, lost_reclaimed = 0;
  // Seconds of history the rings hold: the newest thread's span from the oldest record it
  // still holds to now (estimated from its fill rate when it has wrapped).
  double history_seconds = 0;
};
RingHealth ring_health(const Controller& control);

class LocalProcesses {
 public:
  LocalProcesses();
  // Adds processes started since the last scan and drops those that are gone. Returns the
  // pids added.
  std::vector<uint32_t> scan();
  // The list; scan() alone changes it, under mu() (which another thread takes to read it).
  std::vector<std::unique_ptr<LocalProcess>>& all() { return processes_; }
  std::mutex& mu() { return mu_; }
  // Sleeps until a process's trigger state changes from what `seen` says, kick(), or
  // timeout_ms.
  void wait(int timeout_ms);
  void kick();
  // Freezes every process (but `except`) at once: all requests first, then the answers; a
  // process already frozen (by a signal) is counted without a request.
  // Returns how many froze; errors go to *errors; *requested_ns (if given): when every request
  // was made (CLOCK_REALTIME).
  size_t freeze_all(const LocalProcess* except, std::vector<std::string>* errors,
                    uint64_t* requested_ns = nullptr);
  // Signals every process (but `except`) to freeze (Controller::signal_freeze), without a
  // request nor waiting: freeze_all() after it confirms. Any thread may call it (it takes
  // mu()). Returns how many were signalled.
  size_t signal_freeze_all(const LocalProcess* except);
  // Resumes every process frozen (by its trigger or by us).
  void resume_all(std::vector<std::string>* errors);

 private:
  std::vector<std::unique_ptr<LocalProcess>> processes_;
  std::atomic<uint32_t> kick_{0};
  std::mutex mu_;
};

}  // namespace nanotrace::fleet
