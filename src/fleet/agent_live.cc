// The agent's live view sampler (agent_live.hpp).
#include "fleet/agent_live.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>

namespace nanotrace::fleet {

LiveSampler::LiveSampler(live::LiveOptions options, int interval_ms,
                         std::function<void(const std::string&)> log)
    : options_(std::move(options)), interval_ms_(interval_ms), log_(std::move(log)) {
  thread_ = std::thread([this] { run(); });
}

LiveSampler::~LiveSampler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<const live::LiveFrame> LiveSampler::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

void LiveSampler::make_view() {
  auto view = live::LiveView::create(options_);
  if (view.ok()) {
    view_ = std::move(*view);
    rules_pending_ = false;
    last_error_.clear();
    return;
  }
  if (view.status().message() != last_error_) {
    last_error_ = view.status().message();
    log_("live view: " + last_error_ + " (the rules found from event names are shown meanwhile)");
  }
  // Meanwhile, what the node's processes show without the given rules.
  if (view_ == nullptr || !rules_pending_) {
    live::LiveOptions found = options_;
    found.rules.clear();
    auto fallback = live::LiveView::create(found);
    if (fallback.ok()) view_ = std::move(*fallback);
  }
  rules_pending_ = true;
}

void LiveSampler::run() {
  // The node's programs first, and every other thread of the agent: this one can wait.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    if (view_ == nullptr || rules_pending_) make_view();
    std::shared_ptr<const live::LiveFrame> frame;
    if (view_ != nullptr) {
      auto sampled = std::make_shared<live::LiveFrame>(view_->sample());
      if (rules_pending_) {
        sampled->notes.push_back("the agent's --pair rules: " + last_error_);
      }
      frame = std::move(sampled);
    }
    std::unique_lock lock(mu_);
    if (frame != nullptr) latest_ = std::move(frame);
    // On a fixed schedule; a late sample does not make the next ones come faster.
    next = std::max(next + std::chrono::milliseconds(interval_ms_),
                    std::chrono::steady_clock::now() + std::chrono::milliseconds(interval_ms_ / 4));
    if (cv_.wait_until(lock, next, [this] { return stop_; })) return;
  }
}

}  // namespace nanotrace::fleet
