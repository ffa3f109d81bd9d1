// The agent's repeated freeze announcements (agent_announcer.hpp).
#include "fleet/agent_announcer.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>

namespace nanotrace::fleet {
namespace {

uint64_t monotonic_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

void AnnouncementSchedule::add(const std::string& round, const std::string& text, bool confirmed,
                               uint64_t now_ns) {
  if (repeat_for_ns_ == 0) return;  // announced once, as made
  Pending p;
  p.round = round;
  p.text = text;
  p.until_ns = now_ns + repeat_for_ns_;
  p.next_ns = now_ns + every_ns_;
  p.reached = confirmed;
  p.sent = 1;
  pending_.push_back(std::move(p));
}

void AnnouncementSchedule::link_up(uint64_t now_ns) {
  for (Pending& p : pending_) p.next_ns = std::min(p.next_ns, now_ns);
}

std::vector<AnnouncementSchedule::Due> AnnouncementSchedule::due(uint64_t now_ns) {
  std::vector<Due> out;
  for (Pending& p : pending_) {
    if (p.next_ns > now_ns || now_ns >= p.until_ns) continue;
    out.push_back({p.round, p.text});
    p.next_ns = now_ns + every_ns_;
  }
  return out;
}

void AnnouncementSchedule::sent(const std::string& round, bool confirmed) {
  for (Pending& p : pending_) {
    if (p.round != round) continue;
    ++p.sent;
    p.reached = p.reached || confirmed;
  }
}

std::vector<AnnouncementSchedule::Expired> AnnouncementSchedule::expire(uint64_t now_ns) {
  std::vector<Expired> out;
  auto it = std::remove_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
    if (now_ns < p.until_ns) return false;
    out.push_back({p.round, p.reached, p.sent});
    return true;
  });
  pending_.erase(it, pending_.end());
  return out;
}

uint64_t AnnouncementSchedule::next_ns() const {
  uint64_t next = UINT64_MAX;
  for (const Pending& p : pending_) next = std::min({next, p.next_ns, p.until_ns});
  return next;
}

Announcer::Announcer(uint64_t repeat_for_ns, uint64_t every_ns, Hooks hooks)
    : hooks_(std::move(hooks)), schedule_(repeat_for_ns, every_ns) {
  thread_ = std::thread([this] { loop(); });
}

Announcer::~Announcer() { stop(); }

void Announcer::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Announcer::add(const std::string& round, const std::string& text, bool confirmed) {
  {
    std::lock_guard lock(mu_);
    schedule_.add(round, text, confirmed, monotonic_now());
  }
  cv_.notify_all();
}

void Announcer::link_up() {
  {
    std::lock_guard lock(mu_);
    schedule_.link_up(monotonic_now());
  }
  cv_.notify_all();
}

void Announcer::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const uint64_t now = monotonic_now();
    std::vector<AnnouncementSchedule::Due> due = schedule_.due(now);
    std::vector<AnnouncementSchedule::Expired> expired = schedule_.expire(now);
    if (due.empty() && expired.empty()) {
      const uint64_t next = schedule_.next_ns();
      if (next == UINT64_MAX) {
        cv_.wait(lock);
      } else if (next > now) {
        cv_.wait_for(lock, std::chrono::nanoseconds(next - now));
      }
      continue;
    }
    lock.unlock();  // the publishes and hooks run without the lock: add() never waits on them
    std::vector<std::pair<std::string, bool>> results;
    for (const auto& d : due) {
      if (!hooks_.connected()) break;  // not into the client's reconnect buffer: the next repeat
      results.emplace_back(d.round, hooks_.publish(d.text).ok());
    }
    for (const auto& e : expired) hooks_.expired(e);
    lock.lock();
    for (const auto& [round, confirmed] : results) schedule_.sent(round, confirmed);
  }
}

}  // namespace nanotrace::fleet
