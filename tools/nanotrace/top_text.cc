// The lines of a `nanotrace top` frame: a summary line, then processes (rates and losses),
// pair rules (latency over the last interval and since start, operations in flight), the
// operations in flight oldest first, and events by rate. On a terminal each section gets a
// share of the rows; printed once, nothing is left out.
#include "top_text.hpp"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>

#include "base/utf8.hpp"

namespace nanotrace::cli {
namespace {

using live::human_duration;

// 1234, 12.3k, 4.56M: counts and rates in a narrow column.
std::string count_text(double v) {
  if (v < 10000) return fmt::format("{:.0f}", v);
  if (v < 1e6) return fmt::format("{:.1f}k", v / 1e3);
  if (v < 1e9) return fmt::format("{:.2f}M", v / 1e6);
  return fmt::format("{:.2f}G", v / 1e9);
}

std::string duration_or_dash(uint64_t count, uint64_t ns) {
  return count == 0 ? "-" : human_duration(ns);
}

std::string clock_text(uint64_t realtime_ns) {
  time_t secs = static_cast<time_t>(realtime_ns / 1000000000ull);
  tm local;
  localtime_r(&secs, &local);
  char buf[32];
  strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

// At most `width` characters (code points) of s; width 0: all of it.
std::string cut(const std::string& s, int width) {
  if (width <= 0) return s;
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) == 0x80) continue;
    if (chars++ == static_cast<size_t>(width)) return s.substr(0, i);
  }
  return s;
}

class Lines {
 public:
  explicit Lines(int width) : width_(width) {}
  void add(std::string text, bool heading = false) {
    lines_.push_back({cut(text, width_), heading});
  }
  std::vector<TopLine> take() { return std::move(lines_); }
  size_t size() const { return lines_.size(); }

 private:
  int width_;
  std::vector<TopLine> lines_;
};

void summary_lines(const live::LiveFrame& f, const TopLayout& layout, Lines* out) {
  uint32_t threads = 0;
  double rate = 0;
  uint64_t missed = 0;
  for (const live::LiveProcess& p : f.processes) {
    threads += p.threads;
    rate += p.records_per_second;
    missed += p.missed_interval;
  }
  std::string state =
      f.sequence == 0 ? "  [reading the rings' past: rates from the next frame]" : "";
  if (layout.paused) state += "  [paused]";
  out->add(fmt::format(
      "nanotrace top  {}  {} process{}, {} threads, {} records/s, {} in flight, "
      "{} missed  (every {:.1f}s){}",
      clock_text(f.realtime_ns), f.processes.size(), f.processes.size() == 1 ? "" : "es", threads,
      count_text(rate), f.open_total, missed, layout.every_s, state));
  if (layout.rows > 0) {
    out->add("keys: q quit  p pause  s sort by rate/name  w in-flight list only");
  }
  for (const std::string& n : f.notes) out->add("note: " + utf8::escape_text(n));
}

void process_lines(const live::LiveFrame& f, const TopLayout& layout, size_t limit, Lines* out) {
  std::vector<const live::LiveProcess*> rows;
  for (const live::LiveProcess& p : f.processes) rows.push_back(&p);
  if (layout.sort == TopSort::kRate) {
    std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) {
      return a->records_per_second > b->records_per_second;
    });
  }
  out->add("");
  out->add(
      fmt::format("{:>8} {:<16} {:>7} {:>10} {:>10} {:>10} {:>8} {:>8}  {}", "PID", "PROCESS",
                  "THREADS", "RECORDS/S", "RING LOST", "MISSED", "MISSED/F", "DROPPED", "STATE"),
      true);
  for (size_t i = 0; i < rows.size() && i < limit; ++i) {
    const live::LiveProcess& p = *rows[i];
    out->add(
        fmt::format("{:>8} {:<16} {:>7} {:>10} {:>10} {:>10} {:>8} {:>8}  {}", p.pid,
                    cut(utf8::escape_text(p.name), 16), p.threads, count_text(p.records_per_second),
                    p.ring_dropped + p.lost_no_slot + p.lost_reclaimed, p.missed, p.missed_interval,
                    p.open_dropped + p.slots_reused_unread, p.alive ? "running" : "exited"));
  }
  if (rows.size() > limit) out->add(fmt::format("  ... {} more", rows.size() - limit));
}

void pair_lines(const live::LiveFrame& f, size_t limit, Lines* out) {
  out->add("");
  out->add(fmt::format("{:<44} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>8} {:>6} {:>8}",
                       "PAIR (last interval | since start)", "COUNT", "P50", "P99", "MAX", "COUNT",
                       "P50", "P99", "MAX", "OPEN", "OLDEST"),
           true);
  size_t shown = 0;
  for (const live::LivePair& p : f.pairs) {
    if (shown == limit) break;
    ++shown;
    out->add(fmt::format(
        "{:<44} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>8} {:>6} {:>8}",
        cut(utf8::escape_text(p.rule.begin + " -> " + p.rule.end + " by " + p.rule.key), 44),
        count_text(static_cast<double>(p.last.count)),
        duration_or_dash(p.last.count, p.last.p50_ns),
        duration_or_dash(p.last.count, p.last.p99_ns),
        duration_or_dash(p.last.count, p.last.max_ns),
        count_text(static_cast<double>(p.total.count)),
        duration_or_dash(p.total.count, p.total.p50_ns),
        duration_or_dash(p.total.count, p.total.p99_ns),
        duration_or_dash(p.total.count, p.total.max_ns), p.open,
        duration_or_dash(p.open, p.oldest_open_ns)));
  }
  if (f.pairs.empty()) out->add("  (no pair rule: none given, none found from event names)");
  if (f.pairs.size() > shown) out->add(fmt::format("  ... {} more", f.pairs.size() - shown));
}

void waiter_lines(const live::LiveFrame& f, size_t limit, Lines* out) {
  out->add("");
  out->add(fmt::format("IN FLIGHT, oldest first ({} open)", f.open_total), true);
  out->add(fmt::format("{:>9} {:>8} {:>8} {:<15} {:<16} {:<28} {}", "AGE", "PID", "TID", "THREAD",
                       "KEY", "BEGIN", "FIELDS"),
           true);
  size_t shown = 0;
  for (const live::LiveWaiter& w : f.waiters) {
    if (shown == limit) break;
    ++shown;
    out->add(fmt::format("{:>9} {:>8} {:>8} {:<15} {:<16} {:<28} {}{}", human_duration(w.age_ns),
                         w.pid, w.tid, cut(utf8::escape_text(w.thread), 15),
                         cut(utf8::escape_text(w.key), 16),
                         cut(utf8::escape_text(w.rule.begin), 28), utf8::escape_text(w.fields),
                         w.end_may_be_lost ? "  (records lost since: its end may be one)" : ""));
  }
  if (f.waiters.empty()) out->add("  (none)");
  if (f.open_total > shown) out->add(fmt::format("  ... {} more", f.open_total - shown));
}

void event_lines(const live::LiveFrame& f, const TopLayout& layout, size_t limit, Lines* out) {
  std::vector<const live::LiveEvent*> rows;
  for (const live::LiveEvent& e : f.events) rows.push_back(&e);
  if (layout.sort == TopSort::kRate) {
    // The busiest first: by rate, then (all idle) by records since start.
    std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) {
      return a->per_second != b->per_second ? a->per_second > b->per_second : a->total > b->total;
    });
  }
  out->add("");
  out->add(fmt::format("{:<40} {:>10} {:>12} {:>9}", "EVENT", "RATE/S", "TOTAL", "PROCESSES"),
           true);
  for (size_t i = 0; i < rows.size() && i < limit; ++i) {
    const live::LiveEvent& e = *rows[i];
    out->add(fmt::format("{:<40} {:>10} {:>12} {:>9}", cut(utf8::escape_text(e.event), 40),
                         count_text(e.per_second), e.total, e.processes));
  }
  if (rows.size() > limit) out->add(fmt::format("  ... {} more", rows.size() - limit));
}

}  // namespace

std::vector<TopLine> render_top(const live::LiveFrame& frame, const TopLayout& layout) {
  Lines out(layout.width);
  summary_lines(frame, layout, &out);
  const size_t all = ~size_t{0};
  if (layout.rows <= 0) {
    process_lines(frame, layout, all, &out);
    pair_lines(frame, all, &out);
    waiter_lines(frame, all, &out);
    event_lines(frame, layout, all, &out);
    return out.take();
  }
  // On a screen: what is left after the headings, shared out (each section shows at least a
  // few rows, the waiters the most).
  const int headings = static_cast<int>(out.size()) + (layout.waiters_only ? 3 : 13);
  const auto left = static_cast<size_t>(std::max(4, layout.rows - headings));
  if (layout.waiters_only) {
    waiter_lines(frame, left, &out);
  } else {
    const size_t processes = std::min(frame.processes.size(), std::max<size_t>(2, left / 5));
    const size_t pairs = std::min(frame.pairs.size(), std::max<size_t>(2, left / 5));
    const size_t rest = left > processes + pairs ? left - processes - pairs : 4;
    const size_t waiters = std::max<size_t>(2, rest / 2);
    process_lines(frame, layout, processes, &out);
    pair_lines(frame, pairs, &out);
    waiter_lines(frame, waiters, &out);
    event_lines(frame, layout, rest > waiters ? rest - waiters : 1, &out);
  }
  std::vector<TopLine> lines = out.take();
  if (lines.size() > static_cast<size_t>(layout.rows)) lines.resize(layout.rows);
  return lines;
}

}  // namespace nanotrace::cli
