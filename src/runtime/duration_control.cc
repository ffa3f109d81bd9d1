// Duration triggers in the traced process: the control thread's part (see
// duration_runtime.hpp). It ages the open operations on a deadline, the oldest one's begin
// plus the threshold, so a stuck operation is named within the threshold and the control
// thread's wake-up; it scans nothing while no operation was begun since a scan that found
// none open. It closes a relative threshold's epochs, and publishes the counts.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "nanotrace/nanotrace.hpp"
#include "runtime/duration_runtime.hpp"
#include "runtime/duration_state.hpp"

namespace nanotrace::runtime {
namespace {

constexpr uint64_t kLongestWaitNs = 100'000'000;  // the control thread's own period
constexpr uint64_t kShortestWaitNs = 200'000;     // a deadline due now: a little later
constexpr uint64_t kFrozenWaitNs = 10'000'000;    // fired or frozen: nothing to age
constexpr uint64_t kSlowScanNs = 1'000'000'000;   // a slow trigger's open operations, for status

void* map_zeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t ns_to_ticks(uint64_t ns, uint64_t tps) {
  const double t = static_cast<double>(ns) * static_cast<double>(tps) / 1e9;
  return t >= 1.8e19 ? pairing::SlidingPercentile::kWarmingUp - 1 : static_cast<uint64_t>(t);
}

uint64_t ticks_to_ns(uint64_t ticks, uint64_t tps) {
  const double ns = static_cast<double>(ticks) * 1e9 / static_cast<double>(tps);
  return ns >= 1.8e19 ? ~uint64_t{0} : static_cast<uint64_t>(ns);
}

struct Totals {
  uint64_t begins = 0, pairs = 0, unmatched_ends = 0, replaced = 0, evicted = 0, unseen = 0;
  uint64_t shared_begins = 0;
};

Totals sum_counts(const DurationState& st, uint32_t slots_used) {
  Totals t;
  for (uint32_t i = 0; i < std::min(slots_used, st.slots); ++i) {
    const SlotCounts& c = st.counts[i];
    t.begins += c.begins.load(std::memory_order_relaxed);
    t.pairs += c.pairs.load(std::memory_order_relaxed);
    t.unmatched_ends += c.unmatched_ends.load(std::memory_order_relaxed);
    t.replaced += c.replaced.load(std::memory_order_relaxed);
    t.evicted += c.evicted.load(std::memory_order_relaxed);
    t.unseen += c.unseen.load(std::memory_order_relaxed);
    t.shared_begins += c.shared_begins.load(std::memory_order_acquire);
  }
  return t;
}

// A relative threshold: closes the epoch if it is over.
void close_epoch_if_due(DurationState& st, uint32_t slots_used, uint64_t now_ns) {
  if (st.next_epoch_ns == 0) st.next_epoch_ns = now_ns + st.epoch_ns;
  if (now_ns < st.next_epoch_ns) return;
  uint64_t* cumulative = st.cumulative;
  std::memset(cumulative, 0, sizeof(st.cumulative));
  for (uint32_t i = 0; i < std::min(slots_used, st.slots); ++i) {
    const std::atomic<uint32_t>* h =
        st.histograms + size_t{i} * pairing::DurationHistogram::kBuckets;
    for (uint32_t b = 0; b < pairing::DurationHistogram::kBuckets; ++b) {
      cumulative[b] += h[b].load(std::memory_order_relaxed);
    }
  }
  // A writer's 32-bit counter that wrapped (2^32 pairs of one thread) makes its bucket's sum
  // go down: that epoch counts nothing there.
  st.threshold_ticks.store(st.sliding->close_epoch(cumulative), std::memory_order_relaxed);
  st.next_epoch_ns += st.epoch_ns;
  if (st.next_epoch_ns <= now_ns) st.next_epoch_ns = now_ns + st.epoch_ns;
}

struct Scan {
  uint64_t open = 0;
  uint64_t shared_open = 0;   // of them, in the shared table
  uint64_t oldest_begin = 0;  // 0: none open
  uint64_t stuck = 0;         // not reported yet, open past the threshold
  size_t stuck_index = 0;
  pairing::OpenOp stuck_op;  // the oldest of them
  uint64_t next_deadline = ~uint64_t{0};
  size_t next_index = 0;  // the operation whose deadline that is
  uint64_t next_word = 0;
};

// Scans the open operations; `t`: the counts read before. The shared table is skipped when
// nothing began there since a scan found it empty (a begin is counted after it is stored).
Scan scan_open(DurationState& st, const Totals& t, uint64_t now, uint64_t threshold) {
  Scan s;
  const bool shared = t.shared_begins != st.shared_begins_at_scan || st.shared_open_at_scan != 0;
  st.for_each_open(
      [&](size_t index, const pairing::OpenOp& op) {
        const uint64_t begin = op.begin_full(now);
        if (st.of_forgotten_round(begin)) return;
        ++s.open;
        if (st.in_shared_table(index)) ++s.shared_open;
        if (s.oldest_begin == 0 || begin < s.oldest_begin) s.oldest_begin = begin;
        if (op.reported()) return;
        if (now > begin && now - begin > threshold) {
          if (s.stuck++ == 0 || begin < s.stuck_op.begin_full(now)) {
            s.stuck_index = index;
            s.stuck_op = op;
          }
        } else if (threshold < ~uint64_t{0} - begin && begin + threshold + 1 < s.next_deadline) {
          s.next_deadline = begin + threshold + 1;
          s.next_index = index;
          s.next_word = op.begin_word;
        }
      },
      shared);
  if (shared) {
    st.shared_begins_at_scan = t.shared_begins;
    st.shared_open_at_scan = s.shared_open;
  }
  return s;
}

// The operations open past the threshold are one incident: each is named once.
void mark_stuck_reported(DurationState& st, uint64_t now, uint64_t threshold) {
  st.for_each_open([&](size_t index, const pairing::OpenOp& op) {
    const uint64_t begin = op.begin_full(now);
    if (st.of_forgotten_round(begin)) return;
    if (!op.reported() && now > begin && now - begin > threshold) st.mark_reported(index, op);
  });
}

// A stuck operation's begin record, as the firing names it (now: a full clock value).
EarlierRecord earlier_record_of(const pairing::OpenOp& op, uint64_t now) {
  EarlierRecord match;
  match.event = op.event();
  match.tid = static_cast<uint32_t>(op.tid);
  match.slot = op.slot();
  match.seq = op.seq();
  match.begin_ticks = op.begin_full(now);
  return match;
}

// Fires on the oldest stuck operation. False if it could not now (another firing, or the
// trigger changed): the next pass tries again.
bool fire_stuck(const Runtime::ArmedTrigger& armed, DurationState& st, const Scan& s, uint64_t now,
                uint64_t threshold) {
  const uint64_t armed_state = trigger_state_seen();
  if (!take_fire_token(armed_state)) return false;
  if (!st.limiter.admit(monotonic_ns())) {
    st.held_back.store(st.limiter.held_back(), std::memory_order_relaxed);
    give_back_fire_token();
    return true;  // held back: counted once for this incident
  }
  st.fires.store(st.limiter.fired(), std::memory_order_relaxed);
  const pairing::OpenOp& op = s.stuck_op;
  publish_match(st, DurationMatch{2, op, now - op.begin_full(now), threshold,
                                  armed.duration->roles.front().key_hashed,
                                  static_cast<uint32_t>(std::min<uint64_t>(s.stuck, UINT32_MAX))});
  fire_on_earlier_record(armed, earlier_record_of(op, now), armed_state);
  return true;
}

}  // namespace

void fire_stuck_seen_by_writer(const Runtime::ArmedTrigger& armed, DurationState& st,
                               uint64_t armed_state, uint64_t now) {
  uint64_t deadline = st.watch_deadline.load(std::memory_order_acquire);
  // One writer takes the watched operation; the others go on.
  if (now < deadline ||
      !st.watch_deadline.compare_exchange_strong(deadline, kNoWatch, std::memory_order_acq_rel)) {
    return;
  }
  const size_t index = st.watch_index.load(std::memory_order_relaxed);
  pairing::OpenOp op;
  if (!st.get_open(index, &op) || op.begin_word != st.watch_word.load(std::memory_order_relaxed) ||
      op.reported()) {
    return;  // it ended, or the control thread watches another one now
  }
  const uint64_t threshold = st.threshold_ticks.load(std::memory_order_relaxed);
  const uint64_t begin = op.begin_full(now);
  if (threshold == pairing::SlidingPercentile::kWarmingUp || now <= begin ||
      now - begin <= threshold || !take_fire_token(armed_state)) {
    return;
  }
  const bool admitted = st.limiter.admit(monotonic_ns());
  st.mark_reported(index, op);
  if (!admitted) {
    st.held_back.store(st.limiter.held_back(), std::memory_order_relaxed);
    give_back_fire_token();
    return;
  }
  st.fires.store(st.limiter.fired(), std::memory_order_relaxed);
  // The writer cannot scan the table: the incident counts this operation (the control thread
  // counts every one past the threshold when it is the one that fires).
  publish_match(st, DurationMatch{2, op, now - op.begin_full(now), threshold,
                                  armed.duration->roles.front().key_hashed, 1});
  fire_on_earlier_record(armed, earlier_record_of(op, now), armed_state);
}

namespace {

void publish_counts(DurationState& st, const Totals& t, const Scan* scan, uint64_t capacity) {
  abi::DurationFacts& f = st.header->duration;
  store_fact(&f.pairs, t.pairs);
  store_fact(&f.unmatched_ends, t.unmatched_ends);
  store_fact(&f.replaced, t.replaced);
  store_fact(&f.evicted, t.evicted);
  store_fact(&f.unseen, t.unseen);
  store_fact(&f.held_back, st.held_back.load(std::memory_order_relaxed));
  store_fact(&f.fires, st.fires.load(std::memory_order_relaxed));
  if (scan != nullptr) {
    store_fact(&f.open, scan->open);
    store_fact(&f.oldest_open_ticks, scan->oldest_begin);
  }
  store_fact(&f.current_threshold_ticks, st.threshold_ticks.load(std::memory_order_relaxed));
  store_fact(&f.window_pairs, st.sliding ? st.sliding->window_pairs() : 0);
  store_fact(&f.capacity, capacity);
}

// Ages the open operations of a stuck trigger, if one may be due. Returns the scan, if made.
bool age(const Runtime::ArmedTrigger& armed, DurationState& st, const Totals& t, uint64_t now,
         Scan* s) {
  const uint64_t threshold = st.threshold_ticks.load(std::memory_order_relaxed);
  if (threshold == pairing::SlidingPercentile::kWarmingUp) return false;
  // Nothing open at the last scan and nothing begun since: nothing to age.
  if (t.begins == st.begins_at_scan && st.open_at_scan == 0) {
    st.next_scan_ticks = now + threshold;
    return false;
  }
  if (now < st.next_scan_ticks) return false;
  *s = scan_open(st, t, now, threshold);
  st.begins_at_scan = t.begins;
  st.open_at_scan = s->open;
  // A begin after this scan is stamped after `now`, unless its thread was descheduled
  // between stamping and pairing it.
  st.next_scan_ticks = std::min(s->next_deadline, now + threshold);
  // The writers watch the operation due first (the fields before the deadline that guards
  // them; a writer checks the entry itself before it fires).
  st.watch_deadline.store(kNoWatch, std::memory_order_release);
  st.watch_index.store(s->next_index, std::memory_order_relaxed);
  st.watch_word.store(s->next_word, std::memory_order_relaxed);
  st.watch_deadline.store(s->next_deadline, std::memory_order_release);
  if (s->stuck == 0) return true;
  if (fire_stuck(armed, st, *s, now, threshold)) {
    mark_stuck_reported(st, now, threshold);
  } else {
    st.next_scan_ticks = now;  // try again on the next pass
  }
  return true;
}

}  // namespace

DurationState::DurationState(const DurationRule& rule, abi::SegmentHeader* h,
                             const abi::ThreadSlot* base, uint32_t slot_count)
    : table(kOpenOperations),
      own(slot_count),
      header(h),
      slot_base(base),
      slots(slot_count),
      limiter(rule.limits.cap, rule.limits.per_ns, rule.limits.cooldown_ns),
      threshold_ns(rule.threshold_ns) {
  counts = static_cast<SlotCounts*>(map_zeroed(counts_bytes()));
  if (rule.adaptive()) {
    histograms = static_cast<std::atomic<uint32_t>*>(map_zeroed(histogram_bytes()));
    sliding =
        std::make_unique<pairing::SlidingPercentile>(rule.factor, rule.percentile, rule.warmup);
    epoch_ns = std::max<uint64_t>(rule.window_ns / pairing::SlidingPercentile::kEpochs, 1'000'000);
    if (histograms == nullptr) table.release_pages();
  } else {
    threshold_ticks.store(ns_to_ticks(rule.threshold_ns, ticks_per_second_now(h)));
  }
}

DurationState::~DurationState() {
  if (counts != nullptr) munmap(counts, counts_bytes());
  if (histograms != nullptr) munmap(histograms, histogram_bytes());
}

size_t DurationState::counts_bytes() const { return size_t{slots} * sizeof(SlotCounts); }
size_t DurationState::histogram_bytes() const {
  return size_t{slots} * pairing::DurationHistogram::kBuckets * sizeof(uint32_t);
}

void DurationState::release_pages() {
  table.release_pages();
  own.release_pages();
  // The counts and histograms stay: a retired trigger's are small, and a thread still in it
  // may count into them.
}

void DurationState::forget_open_operations() {
  table.clear();
  own.clear();
  // The last firing's facts belong to the freeze being resumed: a freeze on request later
  // names no pair.
  store_fact(&header->duration.kind, 0);
  begins_at_scan = ~uint64_t{0};
  shared_begins_at_scan = ~uint64_t{0};
  next_scan_ticks = 0;
  round_start_ticks = detail::now_ticks();  // before the new round's state is published
  watch_deadline.store(kNoWatch, std::memory_order_release);
}

bool DurationState::get_open(size_t index, pairing::OpenOp* op) const {
  const size_t shared = table.capacity();
  return index < shared ? table.get(index, op) : own.get(index - shared, op);
}

bool DurationState::mark_reported(size_t index, const pairing::OpenOp& op) {
  const size_t shared = table.capacity();
  return index < shared ? table.mark_reported(index, op) : own.mark_reported(index - shared, op);
}

void publish_match(DurationState& st, const DurationMatch& m) {
  abi::DurationFacts& f = st.header->duration;
  store_fact(&f.kind, m.kind);
  store_fact(&f.begin_event, m.begin.event());
  store_fact(&f.begin_tid, static_cast<uint32_t>(m.begin.tid));
  store_fact(&f.begin_slot, m.begin.slot());
  store_fact(&f.begin_seq, m.begin.seq());
  // A full clock value: the firing comes well within 2^47 ticks of the begin.
  store_fact(&f.begin_ticks, m.begin.begin_full(detail::now_ticks()));
  store_fact(&f.duration_ticks, m.duration_ticks);
  store_fact(&f.threshold_ticks, m.threshold_ticks);
  store_fact(&f.key, m.begin.key);
  store_fact(&f.key_hashed, m.key_hashed ? 1 : 0);
  store_fact(&f.stuck_count, m.stuck_count);
  store_fact(&f.held_back, st.held_back.load(std::memory_order_relaxed));
  store_fact(&f.fires, st.fires.load(std::memory_order_relaxed));
}

void publish_duration_counts_locked(Runtime& rt) {
  const Runtime::ArmedTrigger* armed = rt.armed;
  if (!rt.started.load(std::memory_order_acquire) || armed == nullptr ||
      armed->duration == nullptr) {
    return;
  }
  DurationState& st = *armed->duration->state;
  const Totals totals = sum_counts(st, rt.slot_scan_limit());
  const Scan scan = scan_open(st, totals, detail::now_ticks(), ~uint64_t{0});
  publish_counts(st, totals, &scan, st.capacity());
}

uint64_t duration_control_pass(Runtime& rt) {
  const Runtime::ArmedTrigger* armed = rt.armed;
  if (!rt.started.load(std::memory_order_acquire) || armed == nullptr ||
      armed->duration == nullptr) {
    return kNoDurationWork;
  }
  const DurationPairing& d = *armed->duration;
  DurationState& st = *d.state;
  const uint64_t tps = ticks_per_second_now(st.header);
  const uint64_t now_ns = monotonic_ns();
  const uint32_t slots_used = rt.slot_scan_limit();
  uint64_t wait_ns = kLongestWaitNs;
  if (st.sliding) {
    close_epoch_if_due(st, slots_used, now_ns);
    wait_ns = std::min(wait_ns, st.next_epoch_ns - now_ns);
  } else {
    // The tick rate's estimate improves as the process runs.
    st.threshold_ticks.store(ns_to_ticks(st.threshold_ns, tps), std::memory_order_relaxed);
  }
  const Totals totals = sum_counts(st, slots_used);
  const uint64_t now = detail::now_ticks();
  const bool armed_now = __atomic_load_n(&st.header->trigger_state, __ATOMIC_ACQUIRE) ==
                         static_cast<uint32_t>(abi::TriggerState::kArmed);
  Scan scan;
  bool scanned = false;
  if (d.rule.open && armed_now) {
    scanned = age(*armed, st, totals, now, &scan);
    if (st.threshold_ticks.load(std::memory_order_relaxed) !=
        pairing::SlidingPercentile::kWarmingUp) {
      const uint64_t due = st.next_scan_ticks > now ? st.next_scan_ticks - now : 0;
      wait_ns = std::min(wait_ns, ticks_to_ns(due, tps));
    }
  } else if (d.rule.open) {
    wait_ns = std::min(wait_ns, kFrozenWaitNs);
  }
  if (!scanned && now_ns - st.last_publish_ns >= kSlowScanNs) {
    scan = scan_open(st, totals, now, ~uint64_t{0});  // open operations and the oldest, for status
    scanned = true;
  }
  if (scanned) st.last_publish_ns = now_ns;
  publish_counts(st, totals, scanned ? &scan : nullptr, st.capacity());
  return std::max(wait_ns, kShortestWaitNs);
}

}  // namespace nanotrace::runtime
