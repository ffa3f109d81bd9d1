// Analysing nanotrace data: begin/end pair rules, latency of begin/end pairs (exact
// percentiles, a log2 histogram, the slowest pairs, optionally split by a field of the begin
// event), pairs inferred from event names, and counts and rates per event and thread. The
// interval matcher is in nanotrace/intervals.hpp, the HTML report in nanotrace/report.hpp.
//
// Memory: a latency analysis keeps every matched latency (8 bytes per pair, so percentiles
// are exact) plus one map entry per open interval (begun, not yet ended); everything else
// streams.
//
// Thread safety: a PairMatcher belongs to one thread; the functions take a Trace, which
// belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

// A begin/end pairing rule: records of event `begin` and event `end` (both "group:event")
// whose field `key` has equal values form one interval (e.g. io:submit,io:complete,req).
// For the latency analysis (resolve_pair_with_kernel) either event may be a kernel event of
// a trace file recorded with --kernel (io_uring:io_uring_submit_req), and `key` may join
// several fields with '+' (dev+sector): the interval's key is then the values of all of them.
struct PairRule {
  std::string begin;
  std::string end;
  std::string key;
  std::string label() const { return begin + " -> " + end + " by " + key; }
};

// parse_pair_rule - parses "BEGIN,END,KEY".
// Returns: the rule.
// Errors: kInvalidArgument unless the text has exactly three non-empty comma-separated parts.
Result<PairRule> parse_pair_rule(std::string_view text);

// A PairRule checked against a trace: which event ids begin and end an interval, and at
// which field index each of them carries the key (one full name may cover several call
// sites, hence several ids).
struct ResolvedPair {
  PairRule rule;
  std::vector<uint16_t> begin_ids;
  std::vector<uint16_t> end_ids;
  // Indexed by event id (size = events().size() + 1): key field index, -1 if not a member.
  std::vector<int> key_field;
  // Indexed by event id: 1 = begin, 2 = end, 0 = neither.
  std::vector<uint8_t> role;
  // A key of several fields: the indexes of the fields after the first, per event id (empty
  // for a one-field key).
  std::vector<std::vector<int>> more_key_fields;
  // The same three tables for kernel events (EventInfo::is_kernel: ids index
  // Trace::kernel_events()), and their ids.
  std::vector<uint16_t> kernel_begin_ids;
  std::vector<uint16_t> kernel_end_ids;
  std::vector<int> kernel_key_field;
  std::vector<uint8_t> kernel_role;
  std::vector<std::vector<int>> kernel_more_key_fields;
  bool has_kernel() const { return !kernel_begin_ids.empty() || !kernel_end_ids.empty(); }
  bool composite_key() const { return rule.key.find('+') != std::string::npos; }
};

// resolve_pair - checks rule against trace's event table.
// Returns: the resolved rule.
// Errors: kNotFound if an event name is unknown (the message lists the known events) or if
// the key field is missing from one of the events (the message lists that event's fields).
Result<ResolvedPair> resolve_pair(const Trace& trace, const PairRule& rule);
// resolve_pair_with_kernel - as resolve_pair, for a consumer of read_all_with_kernel() (the
// latency analysis): the events may also be kernel events (a user event of the same name
// wins), and the key may be several fields joined by '+'. Errors: as resolve_pair, and
// kInvalidArgument for an empty key field.
Result<ResolvedPair> resolve_pair_with_kernel(const Trace& trace, const PairRule& rule);

// The full names ("group:event") of the trace's events, sorted and without duplicates.
std::vector<std::string> known_event_names(const Trace& trace);

// Latencies in [lo_ns, hi_ns): powers of two (the first bucket starts at 0).
struct HistogramBucket {
  uint64_t lo_ns = 0;
  uint64_t hi_ns = 0;
  uint64_t count = 0;
};

// Percentiles use the nearest-rank rule on all latencies: pX is the smallest latency such
// that at least X% of the pairs are at or below it (exact, no interpolation).
struct LatencyStats {
  std::string by_value;  // value of the --by field ("" for the whole population)
  uint64_t count = 0;    // matched pairs
  uint64_t unmatched_begins = 0;
  uint64_t min_ns = 0, p50_ns = 0, p90_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0;
  double mean_ns = 0;
  std::vector<HistogramBucket> histogram;  // from the min's bucket to the max's, no gaps
};

// One matched pair, for the list of the slowest.
struct SlowPair {
  uint64_t latency_ns = 0;
  uint64_t begin_ns = 0;           // since the segment's start (as `nanotrace dump` prints)
  uint64_t begin_realtime_ns = 0;  // wall-clock time of the begin record
  uint32_t tid = 0;                // thread of the begin record
  uint32_t pid = 0;                // and its process
  std::string thread;
  std::string key;
  std::string by_value;
};

struct LatencyReport {
  PairRule rule;
  std::string by;  // "" if not split
  uint64_t records = 0;
  uint64_t begins = 0;
  uint64_t ends = 0;
  uint64_t unmatched_ends = 0;  // ends whose begin was never seen (lost, or before the trace)
  uint64_t lost = 0;  // records the trace lost (unmatched records' partners may be among them)
  uint64_t kernel_lost = 0;  // kernel events ftrace overwrote or dropped (rules with kernel events)
  uint64_t corrupt_blocks = 0;  // damaged blocks skipped while reading
  // Pairs during which records were lost, and unmatched records next to a loss (see
  // nanotrace/intervals.hpp): the first may pair the wrong records, the second may have
  // lost their partner.
  uint64_t lost_adjacent_pairs = 0;
  uint64_t lost_adjacent_unmatched = 0;
  LatencyStats overall;
  std::vector<LatencyStats> groups;  // one per --by value, most pairs first
  std::vector<SlowPair> top;         // slowest first
};

// Latencies of the begin/end pairs of one rule as records stream by, matched by an
// IntervalMatcher (nanotrace/intervals.hpp: duplicate begins of an open key count the
// earlier one as unmatched). A latency is end.time_ns - begin.time_ns (0 if a clock step
// makes it negative).
class PairMatcher {
 public:
  // create - checks rule (and `by`, a field of the begin event, "" for none) against trace.
  // top: how many of the slowest pairs to keep.
  // Returns: a matcher. Errors: as resolve_pair, and kNotFound if `by` is not a field of
  // every begin event.
  static Result<std::unique_ptr<PairMatcher>> create(const Trace& trace, const PairRule& rule,
                                                     const std::string& by, uint32_t top);
  ~PairMatcher();
  // Feeds one record (records not in the rule are ignored). threads: the source's thread
  // list, for names of the slowest pairs.
  void add(const Record& record, const std::vector<ThreadStats>& threads);
  // Feeds every record of trace, as add() would get them from trace.read_all(), but read as
  // columns of the rule's events only (several times faster). Returns the threads' final
  // statistics (RecordSource::threads()).
  std::vector<ThreadStats> add_all(Trace& trace);
  // Matched latencies so far, in arrival order (for callers drawing their own charts).
  std::span<const uint64_t> latencies() const;
  // Closes the analysis: open intervals become unmatched begins, percentiles are computed.
  // lost_total: records the trace lost (IntervalMatcher::finish).
  LatencyReport finish(uint64_t lost_total = 0);

 private:
  PairMatcher();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct LatencyOptions {
  PairRule rule;
  std::string by;    // split by this field of the begin event ("" = no split)
  uint32_t top = 0;  // keep the N slowest pairs
};

// analyze_latency - reads every record of trace and matches pairs of options.rule.
// Returns: the report.
// Errors: as PairMatcher::create; kNotFound if the trace has no records or no pair matched
// (the message gives the begin and end counts).
Result<LatencyReport> analyze_latency(Trace& trace, const LatencyOptions& options);

// Stats of a set of latencies (reorders `latencies`). Exposed for tests and for the report.
LatencyStats compute_latency_stats(std::vector<uint64_t>* latencies);
LatencyStats compute_latency_stats(std::span<uint64_t> latencies);

// infer_pairs - begin/end rules guessed from event names in one group: X_start/X_end,
// X_begin/X_end, start/stop, begin/end, submit/complete; key = the first field of the begin
// event that the end event also has. Pairs without a common field are left out.
std::vector<PairRule> infer_pairs(const Trace& trace);

// known_pair_rules - begin/end rules of the events this project itself writes whose names
// infer_pairs does not pair, or would pair by the wrong field: iograph's nodes
// (iograph:node_submit/node_complete by node) and the interposer's io_uring requests
// (io_uring:sqe/cqe by user_data), then the kernel's io_uring and block requests.
std::vector<PairRule> known_pair_rules();

// pairs_that_occur - the rules whose begin event and end event both have records, so that a
// default set of rules (infer_pairs) holds no pair that never fired. records_per_event: the
// records of each event id (index = EventInfo::id), as a pass over the trace counted them.
// Rules that do not resolve against trace are left out.
std::vector<PairRule> pairs_that_occur(const Trace& trace, const std::vector<PairRule>& rules,
                                       const std::vector<uint64_t>& records_per_event);

// Counts and rates of a trace: what `nanotrace stats` prints.
struct Rate {
  uint64_t count = 0;
  uint64_t first_ns = 0;  // time of the first and last record counted (0 if none)
  uint64_t last_ns = 0;
  // (count - 1) per second between the first and the last record; 0 below two records.
  double per_second() const;
};

struct EventCount {
  std::string event;  // "group:event"
  Rate rate;
};

struct TraceStats {
  Rate total;
  std::vector<EventCount> events;  // by name
  std::vector<ThreadStats> threads;
  std::vector<Rate> thread_rates;  // one per entry of threads
  // Records lost, all causes: every thread's losses plus those of every process
  // (lost_outside_threads: the sum of the two below).
  uint64_t lost = 0;
  uint64_t lost_no_slot = 0;    // ProcessInfo::lost_no_slot, summed over the processes
  uint64_t lost_reclaimed = 0;  // ProcessInfo::lost_reclaimed, likewise
  double span_s() const;        // seconds between the first and the last record
};

// The records every process of trace lost outside its threads' rings: the sum of their
// ProcessInfo::lost_no_slot and lost_reclaimed (a trace of several processes holds each
// one's counters).
uint64_t lost_outside_threads(const Trace& trace);

// analyze_stats - reads every record of trace once.
// Returns: counts and rates per event and per thread, and losses. An empty trace gives zero
// counts, not an error.
TraceStats analyze_stats(Trace& trace);

}  // namespace nanotrace
