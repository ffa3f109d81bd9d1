// Counts and rates per event and per thread, and the trace's losses (`nanotrace stats`).
#include <map>

#include "nanotrace/analysis.hpp"

namespace nanotrace {
namespace {

void count(Rate* r, uint64_t t) {
  if (r->count == 0 || t < r->first_ns) r->first_ns = t;
  if (t > r->last_ns) r->last_ns = t;
  ++r->count;
}

}  // namespace

double Rate::per_second() const {
  if (count < 2 || last_ns <= first_ns) return 0;
  return static_cast<double>(count - 1) * 1e9 / static_cast<double>(last_ns - first_ns);
}

double TraceStats::span_s() const {
  return total.count > 1 ? static_cast<double>(total.last_ns - total.first_ns) / 1e9 : 0;
}

uint64_t lost_outside_threads(const Trace& trace) {
  uint64_t lost = 0;
  for (const ProcessInfo& p : trace.processes()) lost += p.lost_no_slot + p.lost_reclaimed;
  return lost;
}

TraceStats analyze_stats(Trace& trace) {
  TraceStats out;
  auto records = trace.read_all_with_kernel();
  std::vector<Rate> per_event(trace.events().size() + 1);
  std::vector<Rate> per_kernel_event(trace.kernel_events().size());
  Record r;
  while (records->next(&r)) {
    count(r.event->is_kernel ? &per_kernel_event[r.event->id] : &per_event[r.event->id], r.time_ns);
    if (out.thread_rates.size() <= r.thread) out.thread_rates.resize(r.thread + 1);
    count(&out.thread_rates[r.thread], r.time_ns);
    count(&out.total, r.time_ns);
  }
  // One name may cover several call sites (ids): sum them under the name.
  std::map<std::string, Rate> by_name;
  for (const EventInfo& e : trace.events()) {
    const Rate& x = per_event[e.id];
    if (x.count == 0) continue;
    Rate& y = by_name[e.full_name()];
    if (y.count == 0 || x.first_ns < y.first_ns) y.first_ns = x.first_ns;
    if (x.last_ns > y.last_ns) y.last_ns = x.last_ns;
    y.count += x.count;
  }
  for (const EventInfo& e : trace.kernel_events()) {
    if (per_kernel_event[e.id].count != 0) by_name[e.full_name()] = per_kernel_event[e.id];
  }
  for (auto& [name, rate] : by_name) out.events.push_back({name, rate});
  out.threads = records->threads();
  out.thread_rates.resize(out.threads.size());
  for (const ProcessInfo& p : trace.processes()) {
    out.lost_no_slot += p.lost_no_slot;
    out.lost_reclaimed += p.lost_reclaimed;
  }
  out.lost = out.lost_no_slot + out.lost_reclaimed;
  for (const ThreadStats& s : out.threads) out.lost += s.lost();
  return out;
}

}  // namespace nanotrace
