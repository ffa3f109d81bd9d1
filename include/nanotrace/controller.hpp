// Controlling a live traced process from another process: switching its groups on and off,
// and arming, disarming and resuming its trigger. This is the library's side of the control
// protocol of docs/format.md ("Triggers", and `control_seq` in "SegmentHeader"): a request is
// written into the segment, the process's control thread carries it out, and the Controller waits
// for its answer, so a refusal (unknown event, bad field, malformed expression) comes back as a
// Status.
//
// Inside the traced process itself, use nanotrace/control.hpp instead.
//
// Thread safety: a Controller belongs to one thread at a time. Two controllers of the same
// process may run at once; requests are then applied in some order, each answered.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

// The post-trigger window of a remote arm(): keep recording this many events (all threads)
// or this many nanoseconds after the match, then freeze. Both 0: freeze at the match.
struct RemoteTriggerWindow {
  uint64_t after_events = 0;
  uint64_t after_ns = 0;
};

class Controller {
 public:
  // attach - opens a live process for control: a pid, "name:NAME" or a segment path.
  // Returns: a controller.
  // Errors: as Trace::open; kInvalidArgument if source is a trace file or its process is not
  // running.
  static Result<std::unique_ptr<Controller>> attach(const std::string& source);

  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // The process as read at attach or at the last trigger() call.
  const ProcessInfo& process() const;
  std::vector<GroupInfo> groups() const;
  // The underlying trace, to read the process's records or events.
  Trace& trace() { return *trace_; }

  // Enables or disables a group. Errors: kNotFound (no such group; the message lists them).
  Status set_group_enabled(const std::string& group, bool enabled);

  // Arms the process's trigger on expression ("io:complete lat_us>1000"; see
  // nanotrace/trigger.hpp), replacing an armed one.
  // Errors: kInvalidArgument (the process refused it: the message says why), kIoError (the
  // process did not handle it within 3 s: its control thread is not running).
  Status arm(std::string_view expression, const RemoteTriggerWindow& window = {});
  // Disarms the trigger. Errors: kIoError as arm().
  Status disarm();
  // Unfreezes rings a trigger froze; the trigger stays armed with the same window.
  // Errors: kInvalidArgument if the trigger has not fired; kIoError as arm().
  Status resume();

  // Freezes the rings now (docs/format.md, "Triggers"): a fired trigger's window ends here; an
  // armed or idle one freezes with no matching record (TriggerInfo::event 0). resume() undoes
  // it. Errors: kIoError as arm().
  Status freeze();
  // freeze() in two halves, so that one thread freezes many processes at once: post_freeze()
  // writes the request and wakes the process; await_answer() waits (at most 3 s) for its
  // answer. REQUIRES: no other request of this controller in between. Other controllers of
  // the process wait (at most 5 s) from post_freeze() to await_answer(): the request slot is
  // the segment's one.
  Result<uint32_t> post_freeze();
  // The first half of post_freeze() without the request: stamps the process's clock now into
  // the segment (the freeze's time: no record begun after it is kept), bumps freeze_seq, sends
  // every writer through its slow path and wakes the control thread, which freezes a process
  // that writes nothing. It touches only the segment's atomic words, so any thread may call
  // it while another uses this controller (a fleet agent freezing from its broker's delivery
  // thread).
  // Errors: kInvalidArgument if the segment was opened read-only.
  Status signal_freeze();
  Status await_answer(uint32_t request);

  // The trigger's state as the segment says now: one load, no re-read of the tables (for a
  // watcher polling many processes). trigger_state_word() is that word, on which the process
  // does a FUTEX_WAKE when it becomes fired or frozen.
  abi::TriggerState trigger_state() const;
  const uint32_t* trigger_state_word() const;

  // The trigger's current state and, once fired, what matched (re-read from the process).
  // Errors: kCorrupt if the segment no longer validates.
  Result<TriggerInfo> trigger();

 private:
  explicit Controller(std::unique_ptr<Trace> trace);
  Status send(std::string_view request, const RemoteTriggerWindow& window);
  Result<uint32_t> post(std::string_view request, const RemoteTriggerWindow& window);
  Status wait_for_answer(uint32_t seq);
  Status take_request_slot();
  void release_request_slot();

  std::unique_ptr<Trace> trace_;
  bool holds_request_slot_ = false;
};

}  // namespace nanotrace
