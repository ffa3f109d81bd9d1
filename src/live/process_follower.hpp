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

#include "live/latency_histogram.hpp"
#include "live/live_view.hpp"
#include "live/open_operations.hpp"
#include "nanotrace/reader.hpp"
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
  LatencyHistogram last, total;
  uint32_t processes = 0;  // following it now
};
// One record of a rule, waiting to be matched in time order. 32 bytes (48 before): a frame at
// 1 M records a second writes and reads a million of them.
struct PendingRecord {
  uint64_t ticks;
  // A one-word key's 8 bytes, or where a text key is in PassBuffers::arena (key_at() and
  // key_len()).
  uint64_t key;
  uint32_t raw_at, raw_len;  // a begin's bytes in PassBuffers::arena
  uint32_t thread;           // index into this pass's threads
  uint16_t rule;
  uint8_t kind;   // 0 begin, 1 end, 2 loss before it
  bool text_key;  // the key is in the arena
  uint32_t key_at() const { return static_cast<uint32_t>(key >> 32); }
  uint32_t key_len() const { return static_cast<uint32_t>(key); }
};
static_assert(sizeof(PendingRecord) == 32);

// Scratch space of a pass, shared by every follower's passes: one buffer that stays in cache
// rather than one per process (50 processes' pending records are megabytes).
struct PassBuffers {
  std::vector<PendingRecord> pending;
  std::vector<size_t> run_starts;  // where each thread's records begin in pending
  std::string arena;               // text keys and begin records' bytes
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
      uint32_t index = 0;      // in the pending records
      uint64_t loss_mark = 0;  // the loss count when it began (OpenOperation::loss_mark)
    };
    analysis::FlatKeyMap<PassBegin> pass_begins;
  };
  std::vector<Rule>& rules() { return rules_; }
  // The process's current clock value (its records' clock).
  uint64_t now_ticks() const;
  // Whether records were lost since `mark` (OpenOperation::loss_mark).
  bool lost_since(uint64_t mark) const { return loss_count_ > mark; }
  // A waiter's key and fields, from its begin record's bytes.
  void describe(const Rule& rule, const OpenOperation& op, LiveWaiter* out) const;

 private:
  struct Cursor {
    uint32_t generation = 0;
    bool known = false;
    bool read_to_exit = false;  // its thread had exited when it was last read to its end
    uint64_t dropped = 0;       // the writer's drops counted so far
    reader::RingPosition position;
  };
  void resolve_rules(Totals* totals);
  void read_thread(const ThreadInfo& info, uint32_t thread, bool counting);
  void scan_span(const RecordSpan& span, uint32_t thread);
  void add_pending(const RecordSpan& span, uint32_t offset, uint32_t size, uint16_t id,
                   uint32_t thread);
  void match_pending(Totals* totals, bool counting);
  void merge_pending_runs();
  void open_pass_begins();
  void note_ring_losses();

  std::unique_ptr<Trace> trace_;
  std::vector<PairRule> given_;
  uint32_t max_open_;
  size_t known_events_ = 0;            // events() size when the tables below were made
  std::vector<uint32_t> event_total_;  // by event id: index into Totals::events
  // The rules an event belongs to (by event id), with what reading its key needs: looked up
  // for every record, so kept beside the id rather than in the rule.
  struct Role {
    uint16_t rule;
    uint8_t kind;     // PendingRecord::kind: 0 begin, 1 end
    bool one_scalar;  // the key is one field that is not a string: its 8 bytes
    int key_field;    // the key's (first) field
  };
  std::vector<std::vector<Role>> roles_;
  std::vector<Rule> rules_;
  std::vector<Cursor> cursors_;      // by slot
  std::vector<uint64_t> counts_;     // records per event id in this pass
  std::vector<ThreadInfo> threads_;  // this pass's
  PassBuffers* buf_ = nullptr;       // the view's, during a pass
  uint64_t loss_count_ = 0;          // every loss seen, for OpenOperation::loss_mark
  uint64_t ring_losses_seen_ = 0;
  LiveProcess stats_;
  bool exited_ = false;
};

}  // namespace nanotrace::live
