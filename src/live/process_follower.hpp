// Following one live process for the live view: each pass reads what every thread wrote since
// the last pass (ring positions kept per thread slot and generation, nothing consumed),
// counts records per event, matches begin and end records of the pair rules in time order
// and keeps the operations still in flight. Internal to src/live.
//
// Thread safety: a ProcessFollower belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/byte_arena.hpp"
#include "live/latency_histogram.hpp"
#include "live/live_view.hpp"
#include "live/open_operations.hpp"
#include "nanotrace/reader.hpp"
#include "reader/record_walk.hpp"
#include "reader/thread_stream.hpp"

namespace nanotrace::live {

// What the passes of every process add up to, by event name and by rule label (owned by the
// view; a follower holds indexes into it).
struct EventTotals {
  std::string name;
  uint64_t count = 0;  // this interval
  uint64_t total = 0;
  uint32_t processes = 0;  // this interval
};
struct PairTotals {
  PairRule rule;
  bool inferred = false;
  LatencyHistogram last, total;  // a pass adds to last; the view merges it into total
  uint32_t processes = 0;        // following it now
};
// A run of one thread's records that a pass copied and the ring walk checked, where it lies
// in PassBuffers::blocks.
struct PassSpan {
  uint64_t at;
  uint32_t bytes, records;
  uint64_t base_ticks;  // what the records' stamps are relative to (abi::expand_ticks)
  bool loss_before;     // records were overwritten just before it: a loss at its first record
};

// Scratch space of a pass, shared by every follower's passes (one process at a time): the
// blocks of every thread copied side by side, so that their records can be read in time
// order across threads, and matched as they are read. It holds at most what one process's
// rings hold (a thread's new blocks, and the block the last pass stopped in).
struct PassBuffers {
  ByteArena blocks;
  std::vector<PassSpan> spans;         // every thread's, thread after thread
  std::vector<uint32_t> thread_spans;  // where each thread's spans begin in spans, then the end
  std::vector<uint32_t> lost_at_end;   // threads whose last records were overwritten unread
  std::string key;                     // a key of text or several fields, being built
};
class Totals {
 public:
  uint32_t event_index(const std::string& name);
  // The rule's index (added on first sight).
  uint32_t pair_index(const PairRule& rule, bool inferred);
  std::vector<EventTotals> events;
  std::vector<PairTotals> pairs;
  PassBuffers buffers;

 private:
  std::vector<std::pair<std::string, uint32_t>> event_names_;  // sorted, for lookups
};

class ProcessFollower {
 public:
  // trace: a live segment. rules: given rules, or empty to infer them.
  ProcessFollower(std::unique_ptr<Trace> trace, const std::vector<PairRule>& rules,
                  uint32_t max_open);

  // One pass. counting: rates and latencies count what it reads (false for the first pass,
  // which reads the rings' past). Returns false once the process has exited and its last
  // records were read.
  bool pass(Totals* totals, bool counting);

  const Trace& trace() const { return *trace_; }
  LiveProcess& stats() { return stats_; }
  // Operations in flight: per rule followed, (pair index in Totals, its table).
  struct Rule {
    ResolvedPair resolved;
    uint32_t pair = 0;  // index into Totals::pairs
    std::unique_ptr<OpenOperations> open;
    // This pass's begins of one-word keys not yet ended, by key. Most operations begin and end
    // within one pass, and pair here without the table of operations in flight (its upkeep was 40 %
    // of a frame in perf).
    struct PassBegin {
      uint64_t ticks = 0;
      uint64_t raw_at = 0;     // the begin record, in PassBuffers::blocks
      uint64_t loss_mark = 0;  // the loss count when it began (OpenOperation::loss_mark)
      uint32_t raw_len = 0;
      uint32_t thread = 0;  // index into this pass's threads
      uint32_t order = 0;   // among this pass's begins, in time order
    };
    analysis::FlatKeyMap<PassBegin> pass_begins;
    LatencyHistogram* latencies = nullptr;  // this pass's: the interval's (null: not counting)
  };
  std::vector<Rule>& rules() { return rules_; }
  // The process's current clock value (its records' clock).
  uint64_t now_ticks() const;
  // Whether records were lost since `mark` (OpenOperation::loss_mark).
  bool lost_since(uint64_t mark) const { return loss_count_ > mark; }
  // A waiter's key and fields, from its begin record's bytes.
  void describe(const Rule& rule, const OpenOperation& op, LiveWaiter* out) const;

 private:
  // Where the last pass stopped in a thread slot's ring.
  struct Cursor {
    uint32_t generation = 0;
    bool known = false;
    bool read_to_exit = false;  // its thread had exited when it was last read to its end
    uint64_t dropped = 0;       // the writer's drops counted so far
    reader::RingPosition position;
  };
  // What a record of an event needs, by event id: looked up for every record read.
  struct EventFacts {
    uint64_t count = 0;       // records in this pass
    uint32_t fixed_size = 0;  // the size of each of its records, or 0: sized by its layout
    uint32_t roles_at = 0;    // its roles in roles_ (a begin or end of a rule)
    uint32_t roles = 0;
    const EventInfo* info = nullptr;
  };
  // A begin or end of a rule, with what reading its key needs.
  struct Role {
    uint16_t rule;
    bool is_begin;
    bool one_scalar;  // the key is one field that is not a string: its 8 bytes
    int key_field;    // the key's (first) field
  };
  // Where the time-ordered scan of one thread's records is (pass_scan.cc): the item it stopped
  // at, a record of a rule or a loss before a span.
  struct ThreadRun {
    uint32_t thread = 0;
    uint32_t span = 0, span_end = 0;  // the next span to enter, in PassBuffers::spans
    uint64_t data_at = 0;             // the current span, in PassBuffers::blocks
    const uint8_t* data = nullptr;
    uint32_t bytes = 0, offset = 0, left = 0;  // of the current span
    uint64_t base_ticks = 0;
    bool loss = false;  // the item: a loss, or the record at `at`
    uint64_t ticks = 0;
    uint32_t at = 0, size = 0;
    uint16_t id = 0;
  };

  void resolve_rules(Totals* totals);
  void bind_events();
  void read_thread(const ThreadInfo& info, uint32_t thread, bool counting);
  // pass_scan.cc: every thread's records of the pass in time order, counted and matched.
  void scan_in_time_order();
  bool advance(ThreadRun* run);
  void match_record(const ThreadRun& run);
  void on_begin(Rule& rule, const OpKey& key, const ThreadRun& run);
  void on_end(Rule& rule, const OpKey& key, uint64_t ticks);
  void add_latency(const Rule& rule, uint64_t begin_ticks, uint64_t end_ticks);
  void open_pass_begins();
  void keep_fresh_details();
  void note_ring_losses();

  std::unique_ptr<Trace> trace_;
  std::vector<PairRule> given_;
  uint32_t max_open_;
  size_t known_events_ = 0;            // events() size when the tables below were made
  std::vector<uint32_t> event_total_;  // by event id: index into Totals::events
  std::vector<EventFacts> events_;     // by event id
  std::vector<Role> roles_;            // by event, in the order of events_
  reader::RecordSizer sizer_;          // records of events without a fixed size
  std::vector<Rule> rules_;
  std::vector<Cursor> cursors_;      // by slot
  std::vector<ThreadInfo> threads_;  // this pass's
  PassBuffers* buf_ = nullptr;       // the view's, during a pass
  std::vector<ThreadRun> runs_;
  std::vector<ThreadRun*> run_heap_;
  uint32_t begin_order_ = 0;
  uint64_t loss_count_ = 0;  // every loss seen, for OpenOperation::loss_mark
  uint64_t ring_losses_seen_ = 0;
  LiveProcess stats_;
  bool exited_ = false;
};

}  // namespace nanotrace::live
