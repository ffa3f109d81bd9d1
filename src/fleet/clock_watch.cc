// The agent's periodic clock-sync reading (clock_watch.hpp).
#include "fleet/clock_watch.hpp"

#include <chrono>

#include "base/clock.hpp"

namespace nanotrace::fleet {

ClockWatch::ClockWatch(int interval_ms) : interval_ms_(interval_ms), thread_([this] { loop(); }) {}

ClockWatch::~ClockWatch() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

ClockWatch::Reading ClockWatch::current() const {
  std::lock_guard lock(mu_);
  return reading_;
}

void ClockWatch::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    Reading r;
    r.sync = rec::read_clock_sync();
    r.read_monotonic_ns = sys::monotonic_ns();
    lock.lock();
    reading_ = std::move(r);
    wake_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] { return stop_; });
  }
}

}  // namespace nanotrace::fleet
