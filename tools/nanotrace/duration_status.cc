// What `nanotrace status` says of a duration trigger (`io:submit..io:complete by req > 5ms`):
// the pair that matched, or the operation still open, with its begin record's fields, and
// the pairing's counts, losses included (abi::DurationFacts).
#include <fmt/format.h>

#include "base/utf8.hpp"
#include "commands.hpp"
#include "nanotrace/trigger.hpp"

namespace nanotrace::cli {
namespace {

std::string ms_text(double ns) {
  if (ns < 1e6) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.2f} ms", ns / 1e6);
  return fmt::format("{:.3f} s", ns / 1e9);
}

double ticks_ns(const Trace& t, uint64_t ticks) {
  const uint64_t tps = t.process().ticks_per_second;
  return tps == 0 ? static_cast<double>(ticks)
                  : static_cast<double>(ticks) * 1e9 / static_cast<double>(tps);
}

// The record `seq` of the thread in `slot` with `tid`, as "event fields", if the rings still
// hold it.
std::string record_text(Trace& t, uint32_t slot, uint32_t tid, uint64_t seq) {
  auto source = t.read_all();
  Record r;
  while (source->next(&r)) {
    if (r.seq != seq) continue;
    const ThreadInfo& info = source->threads()[r.thread].info;
    if (info.slot != slot || info.tid != tid) continue;
    return utf8::escape_text(r.event->full_name() + " " + format_fields(r));
  }
  return "";
}

}  // namespace

void print_duration_status(Trace& t, const TriggerInfo& trig) {
  auto parsed = Trigger::parse(trig.expression);
  if (!parsed.ok() || !parsed->duration) return;
  const DurationRule& rule = *parsed->duration;
  const abi::DurationFacts& d = trig.duration;
  if (d.kind == 1 || d.kind == 2) {
    const EventInfo* begin = t.event_by_id(static_cast<uint16_t>(d.begin_event));
    std::string fields = record_text(t, d.begin_slot, d.begin_tid, d.begin_seq);
    if (fields.empty()) {
      fields = (begin ? utf8::escape_text(begin->full_name()) : std::string("?")) +
               " (overwritten since)";
    }
    const std::string key = d.key_hashed ? fmt::format("key hash {:#x}", d.key)
                                         : fmt::format("{}={}", rule.key_text(), d.key);
    if (d.kind == 1) {
      fmt::print("  slow pair: began with record #{} of thread {} ({}), {}, took {} (> {})\n",
                 d.begin_seq, d.begin_tid, fields, key, ms_text(ticks_ns(t, d.duration_ticks)),
                 ms_text(ticks_ns(t, d.threshold_ticks)));
    } else {
      fmt::print("  stuck: record #{} of thread {} ({}), {}, open {} when it fired (> {})\n",
                 d.begin_seq, d.begin_tid, fields, key, ms_text(ticks_ns(t, d.duration_ticks)),
                 ms_text(ticks_ns(t, d.threshold_ticks)));
      if (d.stuck_count > 1) {
        fmt::print("  {} operations were open past the threshold then (named once, the oldest)\n",
                   d.stuck_count);
      }
    }
  }
  std::string threshold;
  if (rule.adaptive()) {
    threshold = d.current_threshold_ticks == ~uint64_t{0} || d.current_threshold_ticks == 0
                    ? fmt::format("warming up ({} of {} pairs)", d.window_pairs, rule.warmup)
                    : fmt::format("{} now ({} pairs in the window)",
                                  ms_text(ticks_ns(t, d.current_threshold_ticks)), d.window_pairs);
    threshold = ", threshold " + threshold;
  }
  fmt::print("  pairing: {} pairs, {} open{}{}\n", d.pairs, d.open,
             d.oldest_open_ticks != 0 && t.process().alive
                 ? fmt::format(" (oldest began at {} ns)", t.ticks_to_ns(d.oldest_open_ticks))
                 : "",
             threshold);
  fmt::print("  fires: {}, held back by the limits: {}\n", d.fires, d.held_back);
  fmt::print(
      "  not paired: {} ends without a begin, {} begins replaced by one of the same key, {} "
      "evicted (table of {} full), {} records the pairing could not place in time\n",
      d.unmatched_ends, d.replaced, d.evicted, d.capacity, d.unseen);
}

}  // namespace nanotrace::cli
