// The agent's live view of its node (live/live_view.hpp): a thread of its own, at the lowest
// priority (nice 19), samples every traced process of the node each interval and keeps the
// latest frame, which /metrics (the age of the oldest open operation per pair rule, its
// recent p99) and the fleet's `top` command read. The view follows the rings without
// consuming them: a traced program does not notice it, a freeze or a snapshot neither.
//
// A pair rule given (`agent --pair`) that none of the node's processes has the events of yet
// is retried at each interval (its process may start later); until then the frame says so in
// a note, and the rules found from event names are shown.
//
// Thread safety: latest() from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "live/live_view.hpp"

namespace nanotrace::fleet {

class LiveSampler {
 public:
  // interval_ms > 0. log: one line when the view cannot be made (a rule that does not
  // resolve), said once until it changes.
  LiveSampler(live::LiveOptions options, int interval_ms,
              std::function<void(const std::string&)> log);
  ~LiveSampler();  // stops the thread

  // The last frame (nullptr before the first sample).
  std::shared_ptr<const live::LiveFrame> latest() const;

 private:
  void run();
  // A view of options_ (or one with the rules found from event names alone, the given ones
  // named in a note, while they do not resolve).
  void make_view();

  live::LiveOptions options_;
  int interval_ms_;
  std::function<void(const std::string&)> log_;
  std::unique_ptr<live::LiveView> view_;  // the sampler thread's
  bool rules_pending_ = false;            // the given rules do not resolve yet
  std::string last_error_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::shared_ptr<const live::LiveFrame> latest_;
  std::thread thread_;
};

}  // namespace nanotrace::fleet
