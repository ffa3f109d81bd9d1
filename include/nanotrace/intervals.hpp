// Matching begin and end records into intervals: the one pairing rule behind `latency`, the
// HTML report's timeline and the Chrome/Perfetto slices.
//
// A record of a rule's begin event opens an interval under the value of the rule's key
// field; the next record of its end event with the same key value, from any thread (or,
// for kernel events, any CPU), closes it. A begin whose key is still open replaces the open
// interval, which ends unmatched; an end with no open interval is an unmatched end. Rules are
// independent: one record may begin or end intervals of several rules.
//
// Losses: the matcher watches each thread's record numbers (Record::seq). A jump, or a
// thread whose first record is not number 0, means records were lost there, and a lost
// record may be the partner of any interval open at the time. So each outcome says whether
// it is lost-adjacent: a pair during which the trace lost records (its latency may pair the
// wrong records), an unmatched end after a loss, an unmatched begin followed by a loss.
// Losses the stream does not show (see finish()) make every unmatched record lost-adjacent.
//
// Memory: one map entry per open interval (keys of 8 bytes, the scalar values, in a flat
// table; other strings in a map by their text).
//
// Thread safety: an IntervalMatcher belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nanotrace/analysis.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {

// One interval, matched or left open. Times are Record::time_ns; threads are Record::thread.
struct Interval {
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;  // 0 while open
  uint32_t begin_thread = 0;
  uint32_t end_thread = 0;
  uint64_t tag = 0;  // the caller's word, set through IntervalMatch::tag when the interval opened
  bool lost_adjacent = false;
  // end - begin, 0 if a clock step makes it negative.
  uint64_t latency_ns() const { return end_ns > begin_ns ? end_ns - begin_ns : 0; }
};

// What one record did to one rule.
struct IntervalMatch {
  enum class Kind : uint8_t {
    kBegin,         // opened an interval (replaced: an open one of the same key ended unmatched)
    kEnd,           // closed `interval`
    kUnmatchedEnd,  // an end with no open interval of its key
  };
  Kind kind = Kind::kBegin;
  uint32_t rule = 0;  // index into the matcher's rules
  // kEnd: the pair. kBegin with replaced: the interval that ended unmatched.
  Interval interval;
  bool replaced = false;
  // kBegin: the new open interval's tag (0), for the caller to set (e.g. a lane, a group).
  // Valid until the next add().
  uint64_t* tag = nullptr;
  // kUnmatchedEnd: records were lost before it.
  bool lost_adjacent = false;
};

// Counts of one rule.
struct IntervalCounts {
  uint64_t begins = 0;
  uint64_t ends = 0;
  uint64_t pairs = 0;
  uint64_t unmatched_begins = 0;  // replaced, or still open at finish()
  uint64_t unmatched_ends = 0;
  uint64_t lost_adjacent_pairs = 0;
  uint64_t lost_adjacent_unmatched = 0;  // unmatched begins and ends next to a loss
};

class IntervalMatcher {
 public:
  // REQUIRES: rules resolved against the trace whose records are fed (resolve_pair).
  explicit IntervalMatcher(std::vector<ResolvedPair> rules);
  ~IntervalMatcher();
  IntervalMatcher(const IntervalMatcher&) = delete;
  IntervalMatcher& operator=(const IntervalMatcher&) = delete;

  const std::vector<ResolvedPair>& rules() const { return rules_; }

  // Feeds the next record (in time order). Returns what it did, one IntervalMatch per rule it
  // belongs to; empty for records of no rule. Valid until the next call.
  const std::vector<IntervalMatch>& add(const Record& record);

  // The same matching fed by parts, for callers that read columns (nanotrace/columns.hpp)
  // rather than Records. add() is note_sequence() then match() for each rule of the record.
  //
  // note_loss: `records` records missing from one thread's sequence numbers at this point of
  // the stream (ColumnSet::gaps), as add() notices a jump of Record::seq.
  void note_loss(uint64_t records);
  // match: one record of rule `rule`'s begin (begin = true) or end event, whose key field
  // holds `key` (FieldValue::bits of a scalar) or `key_text` (a string's bytes). Returns what
  // it did, as an element of add()'s result; valid until the next call.
  const IntervalMatch& match(uint32_t rule, bool begin, uint64_t key, uint64_t time_ns,
                             uint32_t thread);
  const IntervalMatch& match(uint32_t rule, bool begin, std::string_view key_text, uint64_t time_ns,
                             uint32_t thread);

  // Ends the stream: every interval still open becomes an unmatched begin. Returns them,
  // oldest first, as (rule, interval). lost_total: every record the trace lost (e.g. the sum
  // of ThreadStats::lost()); losses beyond the sequence gaps seen cannot be placed (a
  // discarding writer's drops), so then every unmatched record counts as lost-adjacent.
  std::vector<std::pair<uint32_t, Interval>> finish(uint64_t lost_total = 0);

  const IntervalCounts& counts(uint32_t rule) const { return counts_[rule]; }
  // Records lost as seen in the stream (sequence gaps), all threads.
  uint64_t lost_seen() const { return lost_seen_; }

 private:
  struct Open;
  struct OpenSet;  // one rule's open intervals
  void note_sequence(const Record& record);
  template <class Map, class Key>
  const IntervalMatch& match_in(Map& open, uint32_t rule, bool begin, const Key& key,
                                uint64_t time_ns, uint32_t thread);

  std::vector<ResolvedPair> rules_;
  std::vector<std::unique_ptr<OpenSet>> open_;  // per rule
  std::vector<IntervalCounts> counts_;
  std::vector<IntervalMatch> out_;
  IntervalMatch one_;
  std::string key_bytes_;           // a key of several fields, as add() compares it
  std::vector<uint64_t> next_seq_;  // per reader thread, the expected Record::seq (+1; 0 unseen)
  uint64_t loss_epoch_ = 0;         // sequence gaps seen
  uint64_t lost_seen_ = 0;
  uint64_t order_ = 0;
};

}  // namespace nanotrace
