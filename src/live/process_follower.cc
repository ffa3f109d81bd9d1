// ProcessFollower: one pass over a live process's rings (new records only): the rules and
// tables by event id, the copy of each thread's new blocks, and what the pass adds up to. The
// records themselves are read in pass_scan.cc.
#include "live/process_follower.hpp"

#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstring>

#include "reader/record_walk.hpp"

namespace nanotrace::live {

uint32_t Totals::event_index(const std::string& name) {
  auto it = std::lower_bound(event_names_.begin(), event_names_.end(), name,
                             [](const auto& e, const std::string& n) { return e.first < n; });
  if (it != event_names_.end() && it->first == name) return it->second;
  auto index = static_cast<uint32_t>(events.size());
  events.push_back(EventTotals{name});
  event_names_.insert(it, {name, index});
  return index;
}

uint32_t Totals::pair_index(const PairRule& rule, bool inferred) {
  for (uint32_t i = 0; i < pairs.size(); ++i) {
    const PairRule& r = pairs[i].rule;
    if (r.begin == rule.begin && r.end == rule.end && r.key == rule.key) return i;
  }
  pairs.emplace_back();
  pairs.back().rule = rule;
  pairs.back().inferred = inferred;
  return static_cast<uint32_t>(pairs.size() - 1);
}

ProcessFollower::ProcessFollower(std::unique_ptr<Trace> trace, const std::vector<PairRule>& rules,
                                 uint32_t max_open)
    : trace_(std::move(trace)), given_(rules), max_open_(max_open) {
  const ProcessInfo& p = trace_->process();
  stats_.pid = p.pid;
  stats_.name = p.user_name.empty() ? p.process_name : p.user_name;
}

uint64_t ProcessFollower::now_ticks() const {
  if (trace_->process().clock == abi::ClockKind::kTsc) return __rdtsc();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The rules to follow (given, or found from the event names), resolved against the events
// known now, and the tables by event id built from them. Called again when events appear: a
// new call site of a rule's event is a new id.
void ProcessFollower::resolve_rules(Totals* totals) {
  const bool inferred = given_.empty();
  std::vector<PairRule> wanted = given_;
  if (inferred) {
    wanted = infer_pairs(*trace_);
    for (const PairRule& r : known_pair_rules()) wanted.push_back(r);
  }
  for (const PairRule& rule : wanted) {
    auto resolved = resolve_pair_with_kernel(*trace_, rule);
    if (!resolved.ok()) continue;
    auto same = std::find_if(rules_.begin(), rules_.end(), [&](const Rule& r) {
      return r.resolved.rule.label() == rule.label();
    });
    if (same != rules_.end()) {
      same->resolved = std::move(*resolved);
      continue;
    }
    Rule r;
    r.resolved = std::move(*resolved);
    r.pair = totals->pair_index(rule, inferred);
    r.open = std::make_unique<OpenOperations>(max_open_);
    rules_.push_back(std::move(r));
  }
  const std::vector<EventInfo>& events = trace_->events();
  known_events_ = events.size();
  event_total_.assign(events.size() + 1, 0);
  events_.assign(events.size() + 1, {});
  bind_events();
  for (const EventInfo& e : events) {
    if (events_[e.id].info == &e) event_total_[e.id] = totals->event_index(e.full_name());
  }
  roles_.clear();
  for (size_t id = 0; id < events_.size(); ++id) {
    events_[id].roles_at = static_cast<uint32_t>(roles_.size());
    const EventInfo* e = events_[id].info;
    // Rule indexes are 16 bits: rules past 65,535 are not followed.
    for (uint32_t i = 0; e != nullptr && i < rules_.size() && i <= 0xffff; ++i) {
      const ResolvedPair& rp = rules_[i].resolved;
      if (id >= rp.role.size() || rp.role[id] == 0) continue;
      const int key = rp.key_field[id];
      if (key < 0 || static_cast<size_t>(key) >= e->fields.size()) continue;
      const bool one_scalar =
          rp.more_key_fields[id].empty() && e->fields[key].type != abi::FieldType::kString;
      roles_.push_back(Role{static_cast<uint16_t>(i), rp.role[id] == 1, one_scalar, key});
    }
    events_[id].roles = static_cast<uint32_t>(roles_.size()) - events_[id].roles_at;
  }
}

// The event table is read again at every refresh (a hostile writer may even change an
// event's fields under the same count): what a record's reading takes from it is taken again
// for every pass, as the ring walk's own table is.
void ProcessFollower::bind_events() {
  sizer_ = reader::RecordSizer(trace_->events());
  for (size_t id = 0; id < events_.size(); ++id) {
    const EventInfo* e = trace_->event_by_id(static_cast<uint16_t>(id));
    if (e != nullptr && e->is_guard) e = nullptr;
    events_[id].info = e;
    events_[id].fixed_size = e != nullptr ? e->layout.fixed_size() : 0;
  }
}

bool ProcessFollower::pass(Totals* totals, bool counting) {
  if (exited_) {
    stats_.records = 0;
    return false;
  }
  if (Status s = trace_->refresh(); !s.ok()) {
    // The segment no longer validates (a damaged header): nothing more can be read from it.
    ++stats_.corrupt_blocks;
    stats_.alive = false;
    exited_ = true;
    return false;
  }
  buf_ = &totals->buffers;
  const ProcessInfo& p = trace_->process();
  if (rules_.empty() || trace_->events().size() != known_events_) {
    resolve_rules(totals);
  } else {
    bind_events();
  }
  // Whether the process was still running before its rings were read: if not, this pass
  // reads its last records.
  const bool alive = p.alive;
  threads_ = trace_->threads();
  for (EventFacts& e : events_) e.count = 0;
  begin_order_ = 0;
  for (Rule& r : rules_) r.latencies = counting ? &totals->pairs[r.pair].last : nullptr;
  buf_->blocks.clear();
  buf_->spans.clear();
  buf_->thread_spans.clear();
  buf_->lost_at_end.clear();
  if (cursors_.size() < p.max_threads) cursors_.resize(p.max_threads);
  std::vector<bool> present(cursors_.size(), false);
  for (uint32_t i = 0; i < threads_.size(); ++i) {
    buf_->thread_spans.push_back(static_cast<uint32_t>(buf_->spans.size()));
    if (threads_[i].slot >= cursors_.size()) continue;
    present[threads_[i].slot] = true;
    read_thread(threads_[i], i, counting);
  }
  buf_->thread_spans.push_back(static_cast<uint32_t>(buf_->spans.size()));
  for (size_t slot = 0; slot < cursors_.size(); ++slot) {
    if (!present[slot]) cursors_[slot].known = false;  // freed: a new thread starts at 0
  }
  scan_in_time_order();
  open_pass_begins();
  keep_fresh_details();
  for (Rule& r : rules_) r.open->end_pass();
  note_ring_losses();
  uint64_t records = 0;
  for (size_t id = 1; id < events_.size(); ++id) {
    const uint64_t n = events_[id].count;
    if (n == 0 || !counting) continue;
    EventTotals& e = totals->events[event_total_[id]];
    e.count += n;
    e.total += n;
    ++e.processes;
    records += n;
  }
  stats_.records = records;
  stats_.threads = static_cast<uint32_t>(threads_.size());
  stats_.alive = alive;
  stats_.lost_no_slot = p.lost_no_slot;
  stats_.lost_reclaimed = p.lost_reclaimed;
  stats_.open_dropped = 0;
  for (const Rule& r : rules_) stats_.open_dropped += r.open->dropped();
  if (!alive) exited_ = true;
  return !exited_;
}

void ProcessFollower::read_thread(const ThreadInfo& info, uint32_t thread, bool counting) {
  Cursor& c = cursors_[info.slot];
  reader::RingPosition from;
  // The first pass reads the rings' past: what they lost before the view began is not the
  // view's loss. A thread that appears later is read from its first record on.
  bool past = !counting;
  if (c.known && c.generation == info.generation) {
    from = c.position;
  } else if (c.known) {
    // Another thread took the slot since the last pass: what the one before wrote after the
    // last pass is gone, unless it had exited and been read to its end.
    if (!c.read_to_exit) ++stats_.slots_reused_unread;
    c.dropped = 0;
  } else {
    c.dropped = 0;
  }
  // Copied into the pass's blocks, where they stay until every thread's are read in time
  // order.
  reader::LiveThreadStream stream(*trace_, info, from, thread, trace_->process().block_size,
                                  &buf_->blocks);
  RecordSpan span;
  uint64_t overwritten = 0;
  bool first = true;
  // Whether records were overwritten unread since the last call (not those of the rings'
  // past, on the first pass).
  auto missed = [&] {
    const uint64_t now = stream.stats().overwritten;
    const bool lost = now > overwritten && !(past && first);
    if (lost) {
      stats_.missed += now - overwritten;
      stats_.missed_interval += now - overwritten;
    }
    overwritten = now;
    return lost;
  };
  while (stream.next_span(&span)) {
    const bool lost = missed();
    first = false;
    buf_->spans.push_back(PassSpan{static_cast<uint64_t>(span.data - buf_->blocks.data()),
                                   span.bytes, span.records, span.base_ticks, lost});
  }
  if (missed()) buf_->lost_at_end.push_back(thread);
  stats_.corrupt_blocks += stream.stats().corrupt_blocks;
  if (info.dropped > c.dropped) stats_.ring_dropped += info.dropped - c.dropped;
  c.dropped = info.dropped;
  c.known = true;
  c.generation = info.generation;
  c.position = stream.end();
  c.read_to_exit = info.state == abi::SlotState::kExited;
}

// Records the writers dropped, or lost for want of a slot, cannot be placed in time: every
// operation open now may have lost its end among them.
void ProcessFollower::note_ring_losses() {
  const ProcessInfo& p = trace_->process();
  const uint64_t now = stats_.ring_dropped + p.lost_no_slot + p.lost_reclaimed;
  if (now > ring_losses_seen_) {
    loss_count_ += now - ring_losses_seen_;
    ring_losses_seen_ = now;
  }
}

void ProcessFollower::describe(const Rule& rule, const OpenOperation& op, LiveWaiter* out) const {
  Record r;
  const auto* data = reinterpret_cast<const uint8_t*>(op.raw.data());
  const uint32_t size =
      reader::decode_record(*trace_, data, 0, static_cast<uint32_t>(op.raw.size()), 0, &r);
  out->pid = stats_.pid;
  out->process = stats_.name;
  out->rule = rule.resolved.rule;
  out->tid = op.tid;
  out->thread = op.thread;
  out->begin_realtime_ns = trace_->ticks_to_realtime_ns(op.begin_ticks);
  out->end_may_be_lost = lost_since(op.loss_mark);
  if (size == 0) return;  // its event changed under us: shown without fields
  out->fields = format_fields(r);
  const ResolvedPair& rp = rule.resolved;
  const uint16_t id = r.event->id;
  if (id >= rp.key_field.size() || rp.key_field[id] < 0) return;
  std::vector<int> fields{rp.key_field[id]};
  for (int f : rp.more_key_fields[id]) fields.push_back(f);
  for (size_t i = 0; i < fields.size(); ++i) {
    if (static_cast<uint32_t>(fields[i]) >= r.field_count) continue;
    if (i > 0) out->key += '+';
    out->key += format_value(display_value(r, static_cast<uint32_t>(fields[i])));
  }
}

}  // namespace nanotrace::live
