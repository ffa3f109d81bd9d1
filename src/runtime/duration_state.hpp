// The mutable state of an armed duration trigger in the traced process: the tables of open
// operations (each writer thread's own, in front of a shared one), each writer's counts and
// histogram, the threshold, the fire limits, and what the control thread keeps between its passes.
// Internal header (duration_runtime.cc, duration_control.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "base/thread_open_tables.hpp"
#include "base/trigger_pairing.hpp"
#include "nanotrace/abi.hpp"
#include "nanotrace/trigger.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {

// DurationState::watch_deadline when no operation is watched.
inline constexpr uint64_t kNoWatch = ~uint64_t{0};

// Operations a duration trigger's table holds open (32 bytes each: 512 KiB).
inline constexpr size_t kOpenOperations = 16384;

// One writer's counts (its slot's): written by that thread alone, read by the control thread.
struct alignas(64) SlotCounts {
  std::atomic<uint64_t> begins{0};
  std::atomic<uint64_t> pairs{0};
  std::atomic<uint64_t> unmatched_ends{0};
  std::atomic<uint64_t> replaced{0};
  std::atomic<uint64_t> evicted{0};
  std::atomic<uint64_t> unseen{0};
  std::atomic<uint64_t> shared_begins{0};  // of the begins, those the shared table took
};

struct DurationState {
  DurationState(const DurationRule& rule, abi::SegmentHeader* header,
                const abi::ThreadSlot* slot_base, uint32_t slots);
  ~DurationState();
  bool ok() const { return table.ok() && own.ok() && counts != nullptr; }
  void release_pages();
  // Empties the tables (a resume): what was open at the freeze is forgotten.
  void forget_open_operations();

  // Every operation open, in the shared table (unless `shared` is false) or a writer's own:
  // visit(index, op), index below capacity() (the shared table's first).
  template <class Visit>
  void for_each_open(Visit&& visit, bool shared = true) const;
  bool in_shared_table(size_t index) const { return index < table.capacity(); }
  bool get_open(size_t index, pairing::OpenOp* op) const;
  bool mark_reported(size_t index, const pairing::OpenOp& op);
  size_t capacity() const { return table.capacity() + own.capacity(); }

  // An operation begun and ended on one thread stays in that thread's table; the shared one
  // takes the others (ended on another thread, or its thread's entry taken).
  pairing::OpenTable table;
  pairing::ThreadOpenTables own;
  abi::SegmentHeader* header;
  const abi::ThreadSlot* slot_base;
  uint32_t slots;
  SlotCounts* counts = nullptr;  // per slot
  // Per slot, the pairs' durations in ticks (DurationHistogram buckets); a relative threshold
  // only.
  std::atomic<uint32_t>* histograms = nullptr;
  // What a pair's duration (or an open operation's age) must exceed, in ticks;
  // SlidingPercentile::kWarmingUp while a relative threshold warms up.
  std::atomic<uint64_t> threshold_ticks{pairing::SlidingPercentile::kWarmingUp};

  // A stuck trigger: the open operation whose deadline (begin + threshold) comes first, as of
  // the control thread's last scan, so that a writer whose record is stamped past it names
  // it at once rather than wait for the control thread's turn. A full clock value (a writer
  // expands its record's 48-bit stamp near it), or kNoWatch.
  std::atomic<uint64_t> watch_deadline{kNoWatch};
  std::atomic<uint64_t> watch_index{0};
  std::atomic<uint64_t> watch_word{0};

  // The fire limits: used by whoever holds the fire token.
  pairing::FireLimiter limiter;
  std::atomic<uint64_t> fires{0};
  std::atomic<uint64_t> held_back{0};

  // The control thread's (under the runtime's lock).
  uint64_t threshold_ns = 0;  // a fixed threshold
  std::unique_ptr<pairing::SlidingPercentile> sliding;
  uint64_t epoch_ns = 0, next_epoch_ns = 0;
  uint64_t cumulative[pairing::DurationHistogram::kBuckets] = {};  // the writers' sum
  uint64_t next_scan_ticks = 0;  // the earliest an open operation can pass the threshold
  // When the pairing last started afresh (a resume): an operation begun before it belongs to
  // the round that froze, put in the table after it was emptied by a writer descheduled in
  // its begin. Its end may have been dropped while frozen: it is never aged nor counted.
  uint64_t round_start_ticks = 0;
  bool of_forgotten_round(uint64_t begin_ticks) const { return begin_ticks < round_start_ticks; }
  uint64_t begins_at_scan = ~uint64_t{0};
  uint64_t open_at_scan = 0;
  // The same for the shared table alone: while nothing begins there (the threads' own tables
  // take their operations), a scan skips its 512 KiB.
  uint64_t shared_begins_at_scan = ~uint64_t{0};
  uint64_t shared_open_at_scan = 0;
  uint64_t last_publish_ns = 0;

 private:
  size_t counts_bytes() const;
  size_t histogram_bytes() const;
};

template <class Visit>
void DurationState::for_each_open(Visit&& visit, bool shared) const {
  if (shared) table.for_each(visit);
  const size_t first = table.capacity();
  own.for_each([&](size_t index, const pairing::OpenOp& op) { visit(first + index, op); });
}

// The facts of a firing (abi::DurationFacts).
struct DurationMatch {
  uint32_t kind;  // 1 slow, 2 stuck
  pairing::OpenOp begin;
  uint64_t duration_ticks;
  uint64_t threshold_ticks;
  bool key_hashed;
  uint32_t stuck_count;
};
// REQUIRES: the fire token. Publishes the match's facts before the firing publishes the state.
void publish_match(DurationState& state, const DurationMatch& match);

// A writer's record of a stuck trigger's event stamped `now` (a full clock value), past
// watch_deadline: if the
// watched operation is still open past the threshold, the writer fires on it (duration_control.cc).
void fire_stuck_seen_by_writer(const Runtime::ArmedTrigger& armed, DurationState& state,
                               uint64_t armed_state, uint64_t now);

}  // namespace nanotrace::runtime
