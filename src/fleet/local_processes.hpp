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

// Where a process's thread slots and rings lie in its segment: taken when it is attached (the
// reader checked the header then) and bounded by the mapping, so that what the process writes
// into its header later cannot move a read of ours outside it.
struct RingLayout {
  uint64_t threads_offset = 0;
  uint64_t rings_offset = 0;
  uint32_t slots = 0;  // thread slots whose slot and ring lie inside the mapping
  uint32_t ring_size = 0;
  uint32_t block_size = 0;
  abi::Mode mode = abi::Mode::kOverwrite;
  abi::ClockKind clock = abi::ClockKind::kTsc;
};

struct LocalProcess {
  uint32_t pid = 0;
  std::string name;
  std::string segment;
  std::unique_ptr<Controller> control;
  RingLayout layout;
  abi::TriggerState seen = abi::TriggerState::kNone;    // as of the last look
  bool frozen_by_agent = false;                         // our freeze request froze it
  std::atomic<uint64_t> arms{0}, fires{0}, freezes{0};  // read by the metrics thread
};

// Opens a traced process for control (a segment path, or anything Controller::attach takes).
Result<std::unique_ptr<LocalProcess>> attach_process(const std::string& segment);

// Health of one process's rings, for status and metrics.
struct RingHealth {
  uint32_t threads = 0;
  uint64_t records = 0;            // written since the process started
  uint64_t overwritten_bytes = 0;  // ring bytes written over (history no longer held)
  uint64_t dropped = 0;            // records dropped by writers
  uint64_t lost_no_slot = 0, lost_reclaimed = 0;
  // Seconds of history the process's rings hold: how far back from now every thread's ring
  // still covers. A ring that was never written over holds all its thread wrote, and bounds
  // nothing; of those written over, the one whose oldest block is newest bounds the process
  // (from the start of that block, read from the ring). If no ring was written over: since the
  // oldest thread started.
  double history_seconds = 0;
  uint32_t wrapped_threads = 0;  // threads whose rings were written over
};
// Any thread may call it: it reads the mapping alone (no table of the reader is re-read).
// at_ticks: the moment the history is measured back from, on the process's clock (0: now;
// a frozen process's freeze: what its snapshot holds before it).
RingHealth ring_health(const LocalProcess& process, uint64_t at_ticks = 0);

class LocalProcesses {
 public:
  LocalProcesses();
  // Adds processes started since the last scan and drops those that are gone (once their
  // last trigger state is `seen`), handing them to *gone if given (their mappings, kept, still
  // hold their rings). Returns the pids added.
  std::vector<uint32_t> scan(std::vector<std::unique_ptr<LocalProcess>>* gone = nullptr);
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
