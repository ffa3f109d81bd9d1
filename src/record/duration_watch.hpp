// A duration trigger (`io:submit..io:complete by req > 5ms`, `... open > 50ms`) in the
// recorder: --stop-on and --snapshot-on pair the records they drain with the traced process's
// own pairing code (base/trigger_pairing.hpp: the table of open operations, the relative
// threshold's histogram, the fire limits), one watch per recorded process.
//
// The recorder drains one thread's ring after another, so an end may reach it before the
// begin another thread wrote earlier: an end without an open begin is remembered (a bounded
// list of recent ones), and a begin whose key has a remembered end at or after it pairs with
// it. A stuck operation is one still open past the threshold at the start of a pass, when
// every end written before then has been drained. Records the recorder lost (overwritten
// before it read them) may hold ends: the operations open then are forgotten and counted as
// not seen in time, never called stuck. Internal header.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/trigger_pairing.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/trigger.hpp"
#include "record/drainer.hpp"

namespace nanotrace::rec {

class DurationWatch {
 public:
  // Binds the trigger's begin and end events and key in the process's event table: an error
  // names an event it lacks or a key field an event lacks.
  Status init(const Trigger& trigger, const Trace& trace);
  bool active() const { return rule_ != nullptr; }

  // A record drained. True if it is a slow trigger's match (and the limits let it fire):
  // describe() then names it.
  bool on_record(const Record& r, const StreamState& st);
  // A stuck trigger: true if an operation was open past the threshold at `now` (the
  // process's clock value taken before the pass that just ended) and the limits let it fire.
  bool age(uint64_t now);
  // What matched, for the summary: the pair or the open operation.
  const std::string& describe() const { return match_; }
  // Counts for the summary line.
  std::string counts() const;

 private:
  struct Role {
    bool begin = false;
    std::vector<int> key_fields;
    bool hashed = false;
  };
  uint64_t key_of(const Role& role, const Record& r) const;
  void note_losses(const StreamState& st);
  uint64_t threshold_ticks();
  double ticks_ms(uint64_t ticks) const;
  bool admit();

  const Trace* trace_ = nullptr;
  std::unique_ptr<DurationRule> rule_;
  std::vector<Role> roles_;  // by event id; key_fields empty: not in the rule
  std::unique_ptr<pairing::OpenTable> table_;
  std::unordered_map<uint64_t, uint64_t> recent_ends_;  // key -> end ticks, not paired yet
  std::deque<uint64_t> recent_order_;
  std::unique_ptr<pairing::SlidingPercentile> sliding_;
  std::vector<uint64_t> histogram_;
  uint64_t next_epoch_ns_ = 0;
  std::unique_ptr<pairing::FireLimiter> limiter_;
  std::unordered_map<uint64_t, uint64_t> overwritten_;  // per slot<<32|generation
  std::string match_;
  uint64_t pairs_ = 0, unmatched_ends_ = 0, replaced_ = 0, evicted_ = 0, unseen_ = 0;
};

}  // namespace nanotrace::rec
