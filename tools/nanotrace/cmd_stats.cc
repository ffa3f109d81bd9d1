// `nanotrace stats`: per event and per thread counts, rates and losses of what the rings
// hold now, plus what the process counted itself (records written, dropped, lost for want
// of a thread slot).
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common/utf8.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::cli {
namespace {

struct Counter {
  uint64_t count = 0;
  uint64_t first_ns = ~uint64_t{0};
  uint64_t last_ns = 0;
  void add(uint64_t t) {
    ++count;
    if (t < first_ns) first_ns = t;
    if (t > last_ns) last_ns = t;
  }
  double rate() const {
    if (count < 2 || last_ns <= first_ns) return 0;
    return static_cast<double>(count - 1) * 1e9 / static_cast<double>(last_ns - first_ns);
  }
};

}  // namespace

int cmd_stats(const std::string& source, bool json) {
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  Trace& trace = **opened;
  auto records = trace.read_all();
  std::map<std::string, Counter> per_event;
  std::vector<Counter> per_thread;
  Counter total;
  Record r;
  while (records->next(&r)) {
    per_event[r.event->full_name()].add(r.time_ns);
    if (per_thread.size() <= r.thread) per_thread.resize(r.thread + 1);
    per_thread[r.thread].add(r.time_ns);
    total.add(r.time_ns);
  }
  const std::vector<ThreadStats>& threads = records->threads();
  per_thread.resize(threads.size());
  const ProcessInfo& p = trace.process();
  uint64_t lost = p.lost_no_slot + p.lost_reclaimed;
  for (const ThreadStats& s : threads) lost += s.lost();
  double span_s = total.count > 1 ? static_cast<double>(total.last_ns - total.first_ns) / 1e9 : 0;

  if (json) {
    nlohmann::json events = nlohmann::json::array();
    for (const auto& [name, c] : per_event) {
      events.push_back(
          {{"event", utf8::valid(name)}, {"count", c.count}, {"rate_per_s", c.rate()}});
    }
    nlohmann::json ths = nlohmann::json::array();
    for (size_t i = 0; i < threads.size(); ++i) {
      const ThreadStats& s = threads[i];
      ths.push_back({{"tid", s.info.tid},
                     {"name", utf8::valid(s.info.name)},
                     {"state", s.info.state == abi::SlotState::kExited ? "exited" : "active"},
                     {"records", s.records},
                     {"written", s.info.written},
                     {"rate_per_s", per_thread[i].rate()},
                     {"lost", s.lost()},
                     {"overwritten", s.overwritten},
                     {"dropped", s.dropped},
                     {"corrupt_blocks", s.corrupt_blocks}});
    }
    nlohmann::json out = {{"pid", p.pid},
                          {"alive", p.alive},
                          {"mode", mode_name(p.mode)},
                          {"records", total.count},
                          {"span_s", span_s},
                          {"rate_per_s", total.rate()},
                          {"lost", lost},
                          {"lost_no_slot", p.lost_no_slot},
                          {"lost_reclaimed", p.lost_reclaimed},
                          {"events", events},
                          {"threads", ths}};
    fmt::print("{}\n", dump_json(out));
    return 0;
  }
  fmt::print("process {} ({}), {}, mode {}: {} records over {:.3f} s ({:.0f}/s), {} lost\n", p.pid,
             utf8::escape_text(p.user_name.empty() ? p.process_name : p.user_name),
             p.alive ? "running" : "not running", mode_name(p.mode), total.count, span_s,
             total.rate(), lost);
  if (p.lost_no_slot || p.lost_reclaimed) {
    fmt::print("  lost for want of a thread slot: {}, in reused slots: {}\n", p.lost_no_slot,
               p.lost_reclaimed);
  }
  fmt::print("\n{:<32} {:>12} {:>14}\n", "EVENT", "COUNT", "RATE/s");
  for (const auto& [name, c] : per_event) {
    fmt::print("{:<32} {:>12} {:>14.0f}\n", utf8::escape_text(name), c.count, c.rate());
  }
  fmt::print("\n{:>8} {:<16} {:<7} {:>12} {:>12} {:>14} {:>12} {:>10} {:>10}\n", "TID", "THREAD",
             "STATE", "RECORDS", "WRITTEN", "RATE/s", "LOST", "OVERWR", "DROPPED");
  for (size_t i = 0; i < threads.size(); ++i) {
    const ThreadStats& s = threads[i];
    fmt::print("{:>8} {:<16} {:<7} {:>12} {:>12} {:>14.0f} {:>12} {:>10} {:>10}\n", s.info.tid,
               utf8::escape_text(s.info.name),
               s.info.state == abi::SlotState::kExited ? "exited" : "active", s.records,
               s.info.written, per_thread[i].rate(), s.lost(), s.overwritten, s.dropped);
  }
  return 0;
}

}  // namespace nanotrace::cli
