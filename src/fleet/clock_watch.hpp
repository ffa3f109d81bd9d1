// The node's clock-sync quality as the agent reports it (/metrics, `fleet status`): the
// recorder's reader (record/clock_sync.hpp: chrony's tracking, else ptp4l's offset, else
// unknown) asked on a thread of its own every interval, so that neither a scrape nor a freeze
// waits for a daemon's client to answer. A daemon that does not answer once or twice in a row
// (its client timed out on a busy machine) leaves its last answer standing, with that
// answer's time: the node's clock is not called unknown for one slow reply. Internal header.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "record/clock_sync.hpp"

namespace nanotrace::fleet {

class ClockWatch {
 public:
  using Reader = std::function<rec::ClockSync()>;
  // Reads once now, then every interval_ms until destroyed (reader: the daemons' clients; a
  // test gives its own).
  explicit ClockWatch(
      int interval_ms, Reader reader = [] { return rec::read_clock_sync(); });
  ~ClockWatch();
  ClockWatch(const ClockWatch&) = delete;
  ClockWatch& operator=(const ClockWatch&) = delete;

  struct Reading {
    rec::ClockSync sync;
    uint64_t read_monotonic_ns = 0;  // 0: not read yet
  };
  Reading current() const;

  // Unanswered readings in a row after which an answer no longer stands.
  static constexpr int kUnansweredToForget = 3;

 private:
  void loop();
  void store(rec::ClockSync sync);

  const int interval_ms_;
  const Reader reader_;
  int unanswered_ = 0;  // readings in a row that no daemon answered
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  Reading reading_;
  std::thread thread_;
};

}  // namespace nanotrace::fleet
