// The fleet rounds an agent has seen, so that a round announced again (by another server of
// the cluster, or by a peer repeating its announcement) freezes the node once. Bounded: any
// member with credentials can announce rounds, and a set that kept every id would grow
// without end under a stream of made-up ones. The oldest ids are forgotten first; one seen
// again after that is taken as new, which the rate policy still holds to one freeze per
// interval.
//
// Thread safety: none (the agent guards it with round_mu).
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <unordered_set>

namespace nanotrace::fleet {

class SeenRounds {
 public:
  explicit SeenRounds(size_t capacity = 4096) : capacity_(capacity < 1 ? 1 : capacity) {}

  // True if the round is new (it is remembered from now on); false if it was seen.
  bool insert(const std::string& round) {
    if (!seen_.insert(round).second) return false;
    order_.push_back(round);
    if (order_.size() > capacity_) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }
  size_t size() const { return order_.size(); }

 private:
  size_t capacity_;
  std::unordered_set<std::string> seen_;
  std::deque<std::string> order_;  // oldest first
};

}  // namespace nanotrace::fleet
