// Duration triggers in the traced process: binding, and the writers' part (see
// duration_runtime.hpp). The control thread's part is in duration_control.cc.
#include "runtime/duration_runtime.hpp"

#include <sys/mman.h>

#include <cstring>
#include <string>

#include "base/clock.hpp"
#include "nanotrace/detail/record_layout.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/duration_state.hpp"
#include "runtime/own_record.hpp"

namespace nanotrace::runtime {
namespace {

// Writers count into their own slot's counters: a load and a store, no locked instruction.
void bump(std::atomic<uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// The key of a record whose key cannot be read as one word: a single scalar's bits, else a
// hash of its fields (a string's length and bytes, a scalar's 8 bytes) in order. Not inlined:
// its decoding buffers would make every record's frame large.
[[gnu::noinline]] uint64_t decoded_key(const DurationPairing::Role& role, const uint64_t* record) {
  FieldValue values[abi::kMaxFields];
  decode_own_record(*role.site, record, values);
  if (!role.key_hashed) return values[role.key_fields[0]].bits;
  return pairing::hash_key_fields(values, role.key_fields);
}

// A slow pair: fires on its end record unless another firing holds the token, the trigger
// changed, or the fire limits hold it back.
void fire_slow(const Runtime::ArmedTrigger& armed, DurationState& st, const detail::Site& site,
               uint64_t* record, uint64_t armed_state, const pairing::OpenOp& begun, uint64_t ticks,
               uint64_t threshold, bool hashed) {
  if (auto* hook = g_trigger_test_hook.load(std::memory_order_relaxed)) {
    hook(TriggerHookPoint::kSlowPairFound);  // a test pauses here: a descheduled writer
  }
  if (!take_fire_token(armed_state)) return;
  if (!st.limiter.admit(sys::monotonic_ns())) {
    st.held_back.store(st.limiter.held_back(), std::memory_order_relaxed);
    give_back_fire_token();
    return;
  }
  st.fires.store(st.limiter.fired(), std::memory_order_relaxed);
  publish_match(st, DurationMatch{1, begun, ticks, threshold, hashed, 0});
  fire_on_record(armed, site, record, armed_state);
}

}  // namespace

const DurationPairing::Role* DurationPairing::role_in_order(const detail::Site& site) const {
  for (const Role& r : roles) {
    if (r.site == &site) return &r;
  }
  return nullptr;
}

void duration_record(const Runtime::ArmedTrigger& armed, const detail::Site& site, uint64_t* record,
                     uint64_t armed_state) noexcept {
  const DurationPairing& d = *armed.duration;
  const DurationPairing::Role* role = d.role_of(site);
  if (role == nullptr) return;
  DurationState& st = *d.state;
  const uint64_t key = role->key_word >= 0 ? record[role->key_word] : decoded_key(*role, record);
  abi::ThreadSlot* slot = detail::t_writer.owned;
  const auto index = static_cast<uint32_t>(slot - st.slot_base);
  if (index >= st.slots) return;  // cannot be: every writer's slot is in the segment
  SlotCounts& counts = st.counts[index];
  // A stuck trigger's watched operation is due: this writer names it, if it is still open.
  if (d.rule.open) {
    const uint64_t deadline = st.watch_deadline.load(std::memory_order_relaxed);
    if (deadline != kNoWatch) {
      const uint64_t now = abi::expand_ticks(deadline, record[0] >> 16);  // a full clock value
      if (now >= deadline) fire_stuck_seen_by_writer(armed, st, armed_state, now);
    }
  }
  pairing::OpenOp op;
  if (role->begin) {
    if (auto* hook = g_trigger_test_hook.load(std::memory_order_relaxed)) [[unlikely]] {
      hook(TriggerHookPoint::kDurationBegin);  // a test pauses here: a descheduled writer
    }
    op = {key, record[0], pairing::OpenOp::where_of(index, slot->written), slot->tid};
    pairing::OpenOp dropped;
    // This thread's own table first: no locked instruction, lines that stay in its cache.
    using Own = pairing::ThreadOpenTables;
    const Own::Begin own =
        index < st.own.threads() ? st.own.begin(index, op, &dropped) : Own::Begin::kNotHere;
    if (own != Own::Begin::kNotHere) [[likely]] {
      if (own == Own::Begin::kReplaced) bump(counts.replaced);
      bump(counts.begins);
      return;
    }
    switch (st.table.begin(op, &dropped)) {
      case pairing::OpenTable::Begin::kInserted:
        break;
      case pairing::OpenTable::Begin::kReplaced:
        bump(counts.replaced);
        break;
      case pairing::OpenTable::Begin::kEvicted:
        bump(counts.evicted);
        break;
      case pairing::OpenTable::Begin::kBusy:
        bump(counts.unseen);
        break;
    }
    // After the table's stores, and a release: a scan that counted this begin sees them.
    counts.shared_begins.store(counts.shared_begins.load(std::memory_order_relaxed) + 1,
                               std::memory_order_release);
    bump(counts.begins);
    return;
  }
  // Begun on this thread (most are), else in the shared table, else in another thread's own.
  if (index >= st.own.threads() || !st.own.end_own(index, key, &op)) [[unlikely]] {
    switch (st.table.end(key, &op)) {
      case pairing::OpenTable::End::kMatched:
        break;
      case pairing::OpenTable::End::kUnmatched:
        if (st.own.end_other(index, key, &op)) break;
        bump(counts.unmatched_ends);
        return;
      case pairing::OpenTable::End::kBusy:  // not known to be there: perhaps elsewhere
        if (st.own.end_other(index, key, &op)) break;
        bump(counts.unseen);
        return;
    }
  }
  bump(counts.pairs);
  const uint64_t ticks = pairing::stamp_ticks_between(op.begin_ticks(), record[0] >> 16);
  if (st.histograms != nullptr) {
    std::atomic<uint32_t>& bucket = st.histograms[index * pairing::DurationHistogram::kBuckets +
                                                  pairing::DurationHistogram::bucket(ticks)];
    bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  if (d.rule.open) return;  // a stuck trigger: the end only closes the operation
  const uint64_t threshold = st.threshold_ticks.load(std::memory_order_relaxed);
  if (ticks <= threshold) return;
  fire_slow(armed, st, site, record, armed_state, op, ticks, threshold, role->key_hashed);
}

Result<const Runtime::ArmedTrigger*> bind_duration_trigger_locked(Runtime& rt, Trigger trigger,
                                                                  uint64_t after_events,
                                                                  uint64_t after_ns) {
  const DurationRule& rule = *trigger.duration;
  auto* pairing = new DurationPairing{rule, {}, {}, nullptr};
  std::unordered_map<const detail::Site*, std::vector<uint32_t>> fields;
  abi::SegmentHeader* h = rt.segment.header();
  Status error = Status::Ok();
  bool begins = false, ends = false;
  for (const detail::Site* site : rt.sites) {
    if (site->is_guard) continue;
    const bool begin = rule.begin_group == site->group && rule.begin_event == site->name;
    const bool end = rule.end_group == site->group && rule.end_event == site->name;
    if (!begin && !end) continue;
    auto* e =
        reinterpret_cast<abi::EventEntry*>(rt.segment.base + h->events_offset) + (site->id - 1);
    const char* pool = reinterpret_cast<const char*>(rt.segment.base + h->strings_offset);
    std::vector<std::string> names;
    for (uint32_t f = 0; f < site->field_count; ++f) names.emplace_back(pool + e->field_names[f]);
    auto key = rule.bind_key(std::string(site->group) + ":" + site->name, names);
    if (!key.ok()) {
      if (error.ok()) error = key.status();
      continue;
    }
    DurationPairing::Role role{site, begin, -1, *key, false};
    role.key_hashed = key->size() > 1 || site->types[(*key)[0]] == abi::FieldType::kString;
    // One scalar after scalars only: the key is one word of the record, read without decoding.
    bool scalars_before = true;
    for (uint32_t f = 0; f <= (*key)[0]; ++f) {
      scalars_before = scalars_before && site->types[f] != abi::FieldType::kString;
    }
    if (key->size() == 1 && scalars_before) role.key_word = static_cast<int>(1 + (*key)[0]);
    if (pairing->role_by_id.size() <= site->id) pairing->role_by_id.resize(site->id + 1, 0);
    pairing->roles.push_back(std::move(role));
    pairing->role_by_id[site->id] = static_cast<uint16_t>(pairing->roles.size());
    fields[site] = *key;
    (begin ? begins : ends) = true;
  }
  if (!begins || !ends) {
    const std::string missing = !begins ? rule.begin_name() : rule.end_name();
    Status s = !error.ok() ? error : Status::NotFound("no event " + missing);
    delete pairing;
    return s;
  }
  pairing->state = new DurationState(rule, h, rt.segment.slot(0), h->max_threads);
  if (!pairing->state->ok()) {
    delete pairing->state;
    delete pairing;
    return Status::IoError("no memory for the table of open operations");
  }
  auto* armed = new Runtime::ArmedTrigger{std::move(trigger), std::move(fields), after_events,
                                          after_ns, pairing};
  return armed;
}

void adopt_duration_state_locked(const Runtime::ArmedTrigger& previous,
                                 const Runtime::ArmedTrigger& next) {
  if (previous.duration == nullptr || next.duration == nullptr) return;
  DurationState* fresh = next.duration->state;
  next.duration->state = previous.duration->state;
  delete fresh;  // never published
}

void retire_duration_locked(const Runtime::ArmedTrigger& armed, const Runtime::ArmedTrigger* next) {
  if (armed.duration == nullptr) return;
  if (next != nullptr && next->duration != nullptr &&
      next->duration->state == armed.duration->state) {
    return;
  }
  armed.duration->state->release_pages();
}

void restart_duration_locked(Runtime&, const Runtime::ArmedTrigger& armed) {
  if (armed.duration == nullptr) return;
  armed.duration->state->forget_open_operations();
}

}  // namespace nanotrace::runtime
