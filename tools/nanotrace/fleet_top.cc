// `nanotrace fleet top`'s text (fleet_top.hpp). What an on-call engineer asks first is "what
// is stuck, where, since when": the operations in flight of every node in one list, oldest
// first, naming the node; then each node's health in a few lines (records per second, losses,
// and per pair rule the recent count, p99 and max, and what is open). Every string a node
// sent is escaped (printable): an answer cannot move the cursor or forge a line.
#include "fleet_top.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "fleet/message_fields.hpp"

namespace nanotrace::cli {
namespace {

using fleet::printable;
using live::human_duration;

struct NodeWaiter {
  const std::string* node;
  const live::LiveWaiter* waiter;
};

std::string rule_text(const PairRule& r) {
  return printable(r.begin, 64) + " -> " + printable(r.end, 64) + " by " + printable(r.key, 64);
}

void waiter_lines(const std::vector<fleet::TopAnswer>& answers, uint32_t limit) {
  std::vector<NodeWaiter> all;
  uint64_t open = 0;
  for (const fleet::TopAnswer& a : answers) {
    if (!a.error.empty()) continue;
    open += a.frame.open_total;
    for (const live::LiveWaiter& w : a.frame.waiters) all.push_back({&a.node, &w});
  }
  std::stable_sort(all.begin(), all.end(), [](const NodeWaiter& a, const NodeWaiter& b) {
    return a.waiter->age_ns > b.waiter->age_ns;
  });
  fmt::print("IN FLIGHT, oldest first: {} open on {} node{}{}\n", open, answers.size(),
             answers.size() == 1 ? "" : "s",
             all.size() > limit ? fmt::format(" (the {} oldest)", limit) : "");
  if (all.empty()) return;
  fmt::print("{:>9}  {:<12} {:>8} {:<16} {:>8} {:<15} {:<36} {:<16} {}\n", "AGE", "NODE", "PID",
             "PROCESS", "TID", "THREAD", "RULE", "KEY", "FIELDS");
  for (size_t i = 0; i < all.size() && i < limit; ++i) {
    const live::LiveWaiter& w = *all[i].waiter;
    fmt::print("{:>9}  {:<12} {:>8} {:<16} {:>8} {:<15} {:<36} {:<16} {}{}\n",
               human_duration(w.age_ns), *all[i].node, w.pid, printable(w.process, 16), w.tid,
               printable(w.thread, 15), rule_text(w.rule), printable(w.key, 64),
               printable(w.fields, 200), w.end_may_be_lost ? "  (its end may be lost)" : "");
  }
}

void node_lines(const fleet::TopAnswer& a, uint64_t now_ns) {
  const live::LiveFrame& f = a.frame;
  double rate = 0;
  uint64_t lost = 0, missed = 0;
  for (const live::LiveProcess& p : f.processes) {
    rate += p.records_per_second;
    lost += p.ring_dropped + p.lost_no_slot + p.lost_reclaimed;
    missed += p.missed_interval;
  }
  const double age_s =
      now_ns > f.realtime_ns ? static_cast<double>(now_ns - f.realtime_ns) / 1e9 : 0.0;
  fmt::print(
      "node {}: {} process{}, {:.0f} records/s, {} in flight, {} lost, {} missed by the view "
      "(sampled {:.1f} s ago{})\n",
      a.node, f.processes.size(), f.processes.size() == 1 ? "" : "es", rate, f.open_total, lost,
      missed, age_s, f.sequence == 0 ? ", its first sample: no rates yet" : "");
  for (const live::LivePair& p : f.pairs) {
    std::string last = p.last.count == 0 ? "none ended"
                                         : fmt::format("{} ended, p99 {}, max {}", p.last.count,
                                                       human_duration(p.last.p99_ns),
                                                       human_duration(p.last.max_ns));
    fmt::print("  {}: {} in {:.1f} s; {} open{}\n", rule_text(p.rule), last, f.interval_s, p.open,
               p.open == 0 ? "" : ", the oldest " + human_duration(p.oldest_open_ns));
  }
  for (const std::string& n : f.notes) fmt::print("  note: {}\n", printable(n));
}

}  // namespace

void print_fleet_top(const std::vector<fleet::TopAnswer>& answers, uint32_t waiters,
                     uint64_t now_ns) {
  std::vector<fleet::TopAnswer> shown;
  for (const fleet::TopAnswer& a : answers) {
    if (a.error.empty()) shown.push_back(a);
  }
  waiter_lines(shown, waiters);
  fmt::print("\n");
  for (const fleet::TopAnswer& a : shown) node_lines(a, now_ns);
}

}  // namespace nanotrace::cli
