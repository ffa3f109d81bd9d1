// The agent's periodic clock-sync reading (clock_watch.hpp).
#include "fleet/clock_watch.hpp"

#include <chrono>

#include "base/clock.hpp"

namespace nanotrace::fleet {

ClockWatch::ClockWatch(int interval_ms, Reader reader)
    : interval_ms_(interval_ms), reader_(std::move(reader)), thread_([this] { loop(); }) {}

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
    rec::ClockSync sync = reader_();
    lock.lock();
    store(std::move(sync));
    wake_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] { return stop_; });
  }
}

void ClockWatch::store(rec::ClockSync sync) {
  const bool answered = sync.source != file::SyncSource::kUnknown;
  unanswered_ = answered ? 0 : unanswered_ + 1;
  const bool last_stands =
      reading_.sync.source != file::SyncSource::kUnknown && unanswered_ < kUnansweredToForget;
  if (!answered && last_stands) return;
  reading_.sync = std::move(sync);
  reading_.read_monotonic_ns = sys::monotonic_ns();
}

}  // namespace nanotrace::fleet
