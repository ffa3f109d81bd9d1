// A live view of the traced processes of one node, as `nanotrace top` shows it and the fleet
// agent exports it: per event, rates; per pair rule, latency over the last interval and since
// the view started; the operations in flight, oldest first (the long waiters); losses per
// process, the rings' own and those of the view.
//
// It reads the rings as they are written without consuming them (a recorder or `dump` beside
// it is unaffected, and the traced programs do not notice): each sample reads what each
// thread wrote since the last one. A record overwritten before the view could read it is
// counted (LiveProcess::missed), never silently skipped.
//
// The first sample reads what the rings hold: it finds the operations already in flight but
// counts in no rate or latency (they would count the ring's past as the last interval).
//
// Thread safety: a LiveView belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/analysis.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::live {

struct LiveOptions {
  // pid, name:NAME or a segment path, each a live process; empty: every live traced process
  // of the node, looked for again at each sample.
  std::vector<std::string> sources;
  // Pair rules; empty: those found from each process's event names (infer_pairs) and the
  // pairs the analysis layer knows (known_pair_rules).
  std::vector<PairRule> rules;
  // Operations in flight kept per process and rule; past it the oldest are dropped and
  // counted (LiveProcess::open_dropped).
  uint32_t max_open = 100000;
  // Waiters in a frame, oldest first.
  uint32_t waiters = 20;
};

// Latencies of one rule over a span of time. p50 and p99 come from a log-linear histogram:
// within 1/64 of the exact nearest-rank value; count and max are exact.
struct LatencySummary {
  uint64_t count = 0;
  uint64_t p50_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t max_ns = 0;
};

struct LiveProcess {
  uint32_t pid = 0;
  std::string name;  // NANOTRACE_NAME if set, else the process name
  bool alive = true;
  uint32_t threads = 0;
  uint64_t records = 0;  // read in this interval
  double records_per_second = 0;
  // The rings' own losses since the process started: records the writers dropped (discard
  // or block mode), found no thread slot for, or lost with a reused slot.
  uint64_t ring_dropped = 0;
  uint64_t lost_no_slot = 0;
  uint64_t lost_reclaimed = 0;
  // The view's: records overwritten before it read them, since it started and in this
  // interval; damaged blocks skipped; thread slots reused before their last records were
  // read; operations in flight dropped past LiveOptions::max_open.
  uint64_t missed = 0;
  uint64_t missed_interval = 0;
  uint64_t corrupt_blocks = 0;
  uint64_t slots_reused_unread = 0;
  uint64_t open_dropped = 0;
};

struct LiveEvent {
  std::string event;   // group:event
  uint64_t count = 0;  // records in this interval, every process
  double per_second = 0;
  uint64_t total = 0;      // since the view started
  uint32_t processes = 0;  // processes that wrote it in this interval
};

struct LivePair {
  PairRule rule;
  bool inferred = false;        // found from event names, not given
  uint32_t processes = 0;       // followed processes that have both events
  LatencySummary last;          // pairs that ended in this interval
  LatencySummary total;         // since the view started
  uint64_t open = 0;            // operations in flight now
  uint64_t oldest_open_ns = 0;  // age of the oldest of them (0: none)
  uint64_t replaced = 0;        // begins of a key already open (the earlier one ended unmatched)
  uint64_t unmatched_ends = 0;  // ends whose begin was never seen (lost, or before the view)
};

// An operation in flight: a begin seen, its end not yet.
struct LiveWaiter {
  uint32_t pid = 0;
  std::string process;
  PairRule rule;
  std::string key;  // the key field's value(s), '+'-joined for a key of several fields
  uint32_t tid = 0;
  std::string thread;
  uint64_t age_ns = 0;
  uint64_t begin_realtime_ns = 0;
  std::string fields;  // the begin record's fields, as `dump` prints them
  // Records of its process were lost while it was open: its end may be among them.
  bool end_may_be_lost = false;
};

struct LiveFrame {
  uint64_t sequence = 0;  // 0 for the first sample (rates and latencies empty)
  uint64_t realtime_ns = 0;
  double interval_s = 0;               // since the previous sample
  std::vector<LiveProcess> processes;  // by pid
  std::vector<LiveEvent> events;       // by name
  std::vector<LivePair> pairs;         // by rule label
  std::vector<LiveWaiter> waiters;     // oldest first, at most LiveOptions::waiters
  uint64_t open_total = 0;             // operations in flight, all rules and processes
  std::vector<std::string> notes;      // what the view could not do (a segment unreadable...)
};

class LiveView {
 public:
  // Opens the named sources (each must be a live process's segment) and checks the rules:
  // each given rule must resolve in at least one of them (with no source named, in one of
  // the node's live processes, if any). Errors: as Trace::open and resolve_pair;
  // kInvalidArgument for a trace file or a process that is not running.
  static Result<std::unique_ptr<LiveView>> create(const LiveOptions& options);
  ~LiveView();

  // Reads what every followed process wrote since the previous sample and returns the frame
  // of that interval.
  LiveFrame sample();

 private:
  LiveView();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The frame as JSON (docs/reference/top.md, "JSON"), and back: the fleet sends frames
// between nodes. parse_frame_json never throws: malformed text or a field of the wrong type
// is an error.
std::string frame_json(const LiveFrame& frame);
Result<LiveFrame> parse_frame_json(std::string_view text);
// The same, as a JSON value: the fleet's top answer carries the frame as one of its members.
nlohmann::json frame_json_value(const LiveFrame& frame);
Result<LiveFrame> parse_frame_json_value(const nlohmann::json& value);

// The frame's pair rules as OpenMetrics families (TYPE and HELP lines, then one sample per
// rule labelled begin, end and key), for the fleet agent's /metrics: the age of the oldest
// operation in flight, the operations in flight, the recent p99 and max (NaN when no pair
// ended in the interval); gauges all. labels: more labels put first in
// every sample (e.g. node="n1"), already escaped; "" for none. Without the final "# EOF".
std::string frame_metric_families(const LiveFrame& frame, const std::string& labels);

// "12ns", "3.4us", "5.6ms", "7.89s": a duration as the view shows it.
std::string human_duration(uint64_t ns);

}  // namespace nanotrace::live
