// ProcessFollower: one pass over a live process's rings (new records only), counting events
// and matching the pair rules' records in time order.
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
  roles_.assign(events.size() + 1, {});
  for (const EventInfo& e : events) {
    if (!e.is_guard) event_total_[e.id] = totals->event_index(e.full_name());
  }
  // Rule indexes are 16 bits in a pending record: rules past 65,535 are not followed.
  for (uint32_t i = 0; i < rules_.size() && i <= 0xffff; ++i) {
    const ResolvedPair& rp = rules_[i].resolved;
    for (size_t id = 0; id < rp.role.size() && id < roles_.size(); ++id) {
      const int key = rp.key_field[id];
      if (rp.role[id] == 0 || key < 0) continue;
      const EventInfo* e = trace_->event_by_id(static_cast<uint16_t>(id));
      if (e == nullptr || static_cast<size_t>(key) >= e->fields.size()) continue;
      const bool one_scalar =
          rp.more_key_fields[id].empty() && e->fields[key].type != abi::FieldType::kString;
      roles_[id].push_back(Role{static_cast<uint16_t>(i),
                                static_cast<uint8_t>(rp.role[id] == 1 ? 0 : 1), one_scalar, key});
    }
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
  if (rules_.empty() || trace_->events().size() != known_events_) resolve_rules(totals);
  // Whether the process was still running before its rings were read: if not, this pass
  // reads its last records.
  const bool alive = p.alive;
  threads_ = trace_->threads();
  counts_.assign(trace_->events().size() + 1, 0);
  buf_->pending.clear();
  buf_->run_starts.clear();
  buf_->arena.clear();
  if (cursors_.size() < p.max_threads) cursors_.resize(p.max_threads);
  std::vector<bool> present(cursors_.size(), false);
  for (uint32_t i = 0; i < threads_.size(); ++i) {
    if (threads_[i].slot >= cursors_.size()) continue;
    present[threads_[i].slot] = true;
    read_thread(threads_[i], i, counting);
  }
  for (size_t slot = 0; slot < cursors_.size(); ++slot) {
    if (!present[slot]) cursors_[slot].known = false;  // freed: a new thread starts at 0
  }
  match_pending(totals, counting);
  for (Rule& r : rules_) r.open->end_pass();
  note_ring_losses();
  uint64_t records = 0;
  for (size_t id = 1; id < counts_.size(); ++id) {
    if (counts_[id] == 0 || !counting) continue;
    EventTotals& e = totals->events[event_total_[id]];
    e.count += counts_[id];
    e.total += counts_[id];
    ++e.processes;
    records += counts_[id];
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
  buf_->run_starts.push_back(buf_->pending.size());
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
  reader::LiveThreadStream stream(*trace_, info, from, thread, trace_->process().block_size);
  RecordSpan span;
  uint64_t overwritten = 0;
  bool first = true;
  auto note_missed = [&](uint64_t ticks) {
    const uint64_t now = stream.stats().overwritten;
    if (now > overwritten && !(past && first)) {
      stats_.missed += now - overwritten;
      stats_.missed_interval += now - overwritten;
      buf_->pending.push_back(PendingRecord{ticks, 0, 0, 0, thread, 0, 2, false});
    }
    overwritten = now;
  };
  while (stream.next_span(&span)) {
    uint64_t w0;
    std::memcpy(&w0, span.data, 8);
    note_missed(abi::expand_ticks(span.base_ticks, w0 >> 16));
    first = false;
    scan_span(span, thread);
  }
  note_missed(~uint64_t{0});
  stats_.corrupt_blocks += stream.stats().corrupt_blocks;
  if (info.dropped > c.dropped) stats_.ring_dropped += info.dropped - c.dropped;
  c.dropped = info.dropped;
  c.known = true;
  c.generation = info.generation;
  c.position = stream.end();
  c.read_to_exit = info.state == abi::SlotState::kExited;
}

void ProcessFollower::scan_span(const RecordSpan& span, uint32_t thread) {
  uint32_t offset = 0;
  for (uint32_t r = 0; r < span.records; ++r) {
    if (offset + 8 > span.bytes) break;
    uint64_t w0;
    std::memcpy(&w0, span.data + offset, 8);
    const auto id = static_cast<uint16_t>(w0 & 0xffff);
    const EventInfo* e = trace_->event_by_id(id);
    if (e == nullptr) break;  // the stream checked every id: cannot happen
    const uint32_t size = e->layout.size(span.data, offset, span.bytes);
    if (size == 0) break;
    ++counts_[id];
    if (id < roles_.size() && !roles_[id].empty()) add_pending(span, offset, size, id, thread);
    offset += size;
  }
}

// The key of a rule's record: one scalar field as its 8 bytes; anything else (a string, or
// several fields) as bytes in the arena.
void ProcessFollower::add_pending(const RecordSpan& span, uint32_t offset, uint32_t size,
                                  uint16_t id, uint32_t thread) {
  const EventInfo& e = *trace_->event_by_id(id);
  // Most keys are one scalar of a record without strings: read at its slot, nothing decoded.
  // Otherwise every field is decoded (the key's may follow a string).
  const bool fixed = e.layout.fixed_size() != 0;
  uint64_t bits[abi::kMaxFields];
  struct Text {
    const char* data;
    size_t size;
  } text[abi::kMaxFields];
  if (!fixed) {
    e.layout.decode(
        span.data, offset, offset + size, [&](uint32_t f, uint64_t b) { bits[f] = b; },
        [&](uint32_t f, std::string_view t) {
          text[f] = {t.data(), t.size()};
        });
  }
  auto scalar = [&](int f) {
    if (!fixed) return bits[f];
    uint64_t b;
    std::memcpy(&b, span.data + offset + abi::kWord0Bytes + abi::kScalarSlotBytes * f, 8);
    return b;
  };
  uint64_t w0;
  std::memcpy(&w0, span.data + offset, 8);
  const uint64_t ticks = abi::expand_ticks(span.base_ticks, w0 >> 16);
  for (const Role& role : roles_[id]) {
    // Filled where it stays: a copy from the stack, after stores of single bytes, stalled on
    // store forwarding (two thirds of this function's time in perf).
    PendingRecord& p = buf_->pending.emplace_back();
    p.ticks = ticks;
    p.thread = thread;
    p.rule = role.rule;
    p.kind = role.kind;
    p.text_key = !role.one_scalar;
    p.raw_at = p.raw_len = 0;
    if (role.one_scalar) {
      p.key = scalar(role.key_field);
    } else {
      const auto key_at = static_cast<uint32_t>(buf_->arena.size());
      auto append = [&](int f) {
        if (e.fields[f].type == abi::FieldType::kString) {
          buf_->arena.push_back(static_cast<char>(text[f].size));
          buf_->arena.append(text[f].data, text[f].size);
        } else {
          const uint64_t b = scalar(f);
          buf_->arena.append(reinterpret_cast<const char*>(&b), 8);
        }
      };
      append(role.key_field);
      for (int f : rules_[role.rule].resolved.more_key_fields[id]) append(f);
      p.key = uint64_t{key_at} << 32 | static_cast<uint32_t>(buf_->arena.size() - key_at);
    }
    if (p.kind == 0) {
      p.raw_at = static_cast<uint32_t>(buf_->arena.size());
      buf_->arena.append(reinterpret_cast<const char*>(span.data + offset), size);
      p.raw_len = size;
    }
  }
}

// Time order across threads, each thread's own order kept (an end after its begin): the
// threads' runs merged pairwise. One thread's run is already in order: nothing to do.
void ProcessFollower::merge_pending_runs() {
  buf_->run_starts.push_back(buf_->pending.size());
  auto by_ticks = [](const PendingRecord& a, const PendingRecord& b) { return a.ticks < b.ticks; };
  for (size_t runs = buf_->run_starts.size() - 1; runs > 1; runs = buf_->run_starts.size() - 1) {
    std::vector<size_t> merged;
    for (size_t r = 0; r < runs; r += 2) {
      merged.push_back(buf_->run_starts[r]);
      if (r + 1 < runs) {
        std::inplace_merge(buf_->pending.begin() + buf_->run_starts[r],
                           buf_->pending.begin() + buf_->run_starts[r + 1],
                           buf_->pending.begin() + buf_->run_starts[r + 2], by_ticks);
      }
    }
    merged.push_back(buf_->pending.size());
    buf_->run_starts = std::move(merged);
  }
}

void ProcessFollower::match_pending(Totals* totals, bool counting) {
  merge_pending_runs();
  auto add_latency = [&](PairTotals& to, uint64_t begin, uint64_t end) {
    if (!counting) return;
    const uint64_t b = trace_->ticks_to_ns(begin), e = trace_->ticks_to_ns(end);
    to.last.add(e > b ? e - b : 0);
    to.total.add(e > b ? e - b : 0);
  };
  const std::vector<PendingRecord>& pending = buf_->pending;
  for (uint32_t i = 0; i < pending.size(); ++i) {
    const PendingRecord& p = pending[i];
    if (p.kind == 2) {
      ++loss_count_;
      continue;
    }
    Rule& rule = rules_[p.rule];
    OpKey key;
    if (p.text_key) {
      key.is_text = true;
      key.text = std::string_view(buf_->arena).substr(p.key_at(), p.key_len());
    } else {
      key.bits = p.key;
    }
    PairTotals& of_rule = totals->pairs[rule.pair];
    if (p.kind == 0) {
      if (auto end = rule.open->pair_with_kept(key, p.ticks)) {
        add_latency(of_rule, p.ticks, *end);
      } else if (p.text_key) {
        rule.open->replace(key);
        OpenOperation* op = nullptr;
        rule.open->open(key, p.ticks, &op);
        op->pass_thread = p.thread;
        op->raw_at = p.raw_at;
        op->raw_len = p.raw_len;
        op->loss_mark = loss_count_;
      } else if (auto [earlier, fresh] = rule.pass_begins.try_emplace(p.key, {i, loss_count_});
                 fresh) {
        rule.open->replace(key);  // one still open from an earlier pass
      } else {
        rule.open->count_replaced();  // one of this pass that never ended
        *earlier = {i, loss_count_};
      }
      continue;
    }
    Rule::PassBegin begun;
    if (!p.text_key && rule.pass_begins.take(p.key, &begun)) {
      add_latency(of_rule, pending[begun.index].ticks, p.ticks);
    } else if (auto begin = rule.open->end(key, p.ticks)) {
      add_latency(of_rule, *begin, p.ticks);
    }
  }
  open_pass_begins();
  // The details of the operations that stayed open, copied out of this pass's buffers.
  for (Rule& rule : rules_) {
    rule.open->take_fresh([&](OpenOperation& op) {
      const ThreadInfo& t = threads_[op.pass_thread];
      op.tid = t.tid;
      op.thread = t.name;
      op.raw.assign(buf_->arena, op.raw_at, op.raw_len);
      std::memcpy(&op.event, op.raw.data(), 2);
    });
  }
}

// This pass's begins that did not end in it stay open: into the table, oldest first.
void ProcessFollower::open_pass_begins() {
  std::vector<Rule::PassBegin> left;
  for (Rule& rule : rules_) {
    left.clear();
    rule.pass_begins.for_each([&](uint64_t, const Rule::PassBegin& b) { left.push_back(b); });
    rule.pass_begins.clear();
    std::sort(left.begin(), left.end(),
              [](const auto& a, const auto& b) { return a.index < b.index; });
    for (const Rule::PassBegin& b : left) {
      const PendingRecord& p = buf_->pending[b.index];
      OpKey key;
      key.bits = p.key;
      OpenOperation* op = nullptr;
      rule.open->open(key, p.ticks, &op);
      op->pass_thread = p.thread;
      op->raw_at = p.raw_at;
      op->raw_len = p.raw_len;
      op->loss_mark = b.loss_mark;
    }
  }
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
