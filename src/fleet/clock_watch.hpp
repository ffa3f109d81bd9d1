// The node's clock-sync quality as the agent reports it (/metrics, `fleet status`): the
// recorder's reader (record/clock_sync.hpp: chrony's tracking, else ptp4l's offset, else
// unknown) asked on a thread of its own every interval, so that neither a scrape nor a freeze
// waits for a daemon's client to answer. Internal header.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "record/clock_sync.hpp"

namespace nanotrace::fleet {

class ClockWatch {
 public:
  // Reads once now, then every interval_ms until destroyed.
  explicit ClockWatch(int interval_ms);
  ~ClockWatch();
  ClockWatch(const ClockWatch&) = delete;
  ClockWatch& operator=(const ClockWatch&) = delete;

  struct Reading {
    rec::ClockSync sync;
    uint64_t read_monotonic_ns = 0;  // 0: not read yet
  };
  Reading current() const;

 private:
  void loop();

  const int interval_ms_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  Reading reading_;
  std::thread thread_;
};

}  // namespace nanotrace::fleet
