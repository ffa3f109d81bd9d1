// ProcessFollower's reading of one pass's records: every thread's new records, copied side by
// side by the pass, read in time order across threads (each thread's own order kept), each
// counted, and the pair rules' begins and ends matched as they come. Begins and ends that
// pair within the pass never enter the table of operations in flight; the begins left over
// do, with their details.
//
// Reading in time order as the records are walked, rather than queueing the rules' records
// and merging the queues, took a sixth off a frame's CPU (docs/performance.md, `top`); a
// thread whose records come first runs on without the heap, so a thread alone costs no merge.
#include <algorithm>
#include <cstring>

#include "live/process_follower.hpp"

namespace nanotrace::live {
namespace {

// Whether run a comes after run b: by the time of their items, then by thread (the order the
// threads were read in, as a stable merge of their runs would have it).
template <class Run>
bool later(const Run* a, const Run* b) {
  return a->ticks != b->ticks ? a->ticks > b->ticks : a->thread > b->thread;
}

}  // namespace

void ProcessFollower::scan_in_time_order() {
  runs_.clear();
  for (uint32_t t = 0; t + 1 < buf_->thread_spans.size(); ++t) {
    ThreadRun run;
    run.thread = t;
    run.span = buf_->thread_spans[t];
    run.span_end = buf_->thread_spans[t + 1];
    if (run.span != run.span_end) runs_.push_back(run);
  }
  run_heap_.clear();
  for (ThreadRun& run : runs_) {
    if (advance(&run)) run_heap_.push_back(&run);
  }
  auto heap_order = [](const ThreadRun* a, const ThreadRun* b) { return later(a, b); };
  std::make_heap(run_heap_.begin(), run_heap_.end(), heap_order);
  while (!run_heap_.empty()) {
    std::pop_heap(run_heap_.begin(), run_heap_.end(), heap_order);
    ThreadRun* run = run_heap_.back();
    run_heap_.pop_back();
    // The earliest run goes on while it stays the earliest: one thread's run never needs
    // the heap.
    for (;;) {
      if (run->loss) {
        ++loss_count_;
      } else {
        match_record(*run);
      }
      if (!advance(run)) break;
      if (!run_heap_.empty() && later(run, run_heap_.front())) {
        run_heap_.push_back(run);
        std::push_heap(run_heap_.begin(), run_heap_.end(), heap_order);
        break;
      }
    }
  }
  // Losses after a thread's last record read come after every record of the pass.
  loss_count_ += buf_->lost_at_end.size();
}

// Moves run to its next item: a loss before the span it enters, or a record of a rule.
// Records of no rule are counted on the way. False at the end of the thread's records.
bool ProcessFollower::advance(ThreadRun* run) {
  ThreadRun& r = *run;
  for (;;) {
    while (r.left == 0) {
      if (r.span == r.span_end) return false;
      const PassSpan& s = buf_->spans[r.span++];
      r.data_at = s.at;
      r.data = buf_->blocks.data() + s.at;
      r.bytes = s.bytes;
      r.offset = 0;
      r.left = s.records;
      r.base_ticks = s.base_ticks;
      if (s.loss_before && r.left > 0 && r.bytes >= 8) {
        r.loss = true;
        r.ticks = abi::expand_ticks(r.base_ticks, reader::load_u64(r.data) >> 16);
        return true;
      }
    }
    // The ring walk checked every record of the span; these checks only keep a damaged
    // table from reading out of bounds.
    if (r.bytes - r.offset < 8) {
      r.left = 0;
      continue;
    }
    const uint64_t w0 = reader::load_u64(r.data + r.offset);
    const auto id = static_cast<uint16_t>(w0 & 0xffff);
    if (id >= events_.size()) {
      r.left = 0;
      continue;
    }
    EventFacts& e = events_[id];
    uint32_t size = e.fixed_size;
    if (size == 0 || size > r.bytes - r.offset) size = sizer_.size(r.data, r.offset, r.bytes);
    if (size == 0) {
      r.left = 0;
      continue;
    }
    ++e.count;
    --r.left;
    const uint32_t at = r.offset;
    r.offset += size;
    if (e.roles != 0) {
      r.loss = false;
      r.ticks = abi::expand_ticks(r.base_ticks, w0 >> 16);
      r.at = at;
      r.size = size;
      r.id = id;
      return true;
    }
  }
}

// One conversion of the difference rather than one of each end: within a nanosecond of
// end time minus begin time, and a tenth of a frame's CPU less at a million records a second.
inline void ProcessFollower::add_latency(const Rule& rule, uint64_t begin_ticks,
                                         uint64_t end_ticks) {
  if (rule.latencies == nullptr) return;
  const uint64_t ticks = end_ticks > begin_ticks ? end_ticks - begin_ticks : 0;
  rule.latencies->add(trace_->ticks_to_ns(trace_->time_origin().ticks + ticks));
}

inline void ProcessFollower::on_begin(Rule& rule, const OpKey& key, const ThreadRun& run) {
  if (auto end = rule.open->pair_with_kept(key, run.ticks)) {
    add_latency(rule, run.ticks, *end);
    return;
  }
  if (key.is_text) {
    rule.open->replace(key);
    OpenOperation* op = nullptr;
    rule.open->open(key, run.ticks, &op);
    op->pass_thread = run.thread;
    op->raw_at = run.data_at + run.at;
    op->raw_len = run.size;
    op->loss_mark = loss_count_;
    return;
  }
  const Rule::PassBegin begun{run.ticks, run.data_at + run.at, loss_count_,
                              run.size,  run.thread,           begin_order_++};
  auto [earlier, fresh] = rule.pass_begins.try_emplace(key.bits, begun);
  if (fresh) {
    rule.open->replace(key);  // one still open from an earlier pass
  } else {
    rule.open->count_replaced();  // one of this pass that never ended
    *earlier = begun;
  }
}

inline void ProcessFollower::on_end(Rule& rule, const OpKey& key, uint64_t ticks) {
  if (!key.is_text && rule.pass_begins.take_with(key.bits, [&](const Rule::PassBegin& b) {
        add_latency(rule, b.ticks, ticks);
      })) {
    return;
  }
  if (auto begin = rule.open->end(key, ticks)) add_latency(rule, *begin, ticks);
}

// The key of each rule the record belongs to: one scalar field as its 8 bytes; anything else
// (a string, or several fields) as bytes in PassBuffers::key.
void ProcessFollower::match_record(const ThreadRun& run) {
  const EventFacts& facts = events_[run.id];
  if (facts.info == nullptr) return;  // not an event now (the walk would not have passed it)
  const EventInfo& e = *facts.info;
  const uint8_t* record = run.data + run.at;
  // Most keys are one scalar of a record without strings: read at its slot, nothing decoded.
  // Otherwise every field is decoded (the key's may follow a string).
  const bool fixed = facts.fixed_size != 0;
  // The roles were found in the event table of an earlier pass: a key field the record does
  // not have now is not read.
  const uint32_t fields = e.layout.field_count();
  if (fixed && facts.roles == 1 && roles_[facts.roles_at].one_scalar) {
    // Most rule records: one role, its key one scalar at its slot.
    const Role& role = roles_[facts.roles_at];
    if (static_cast<uint32_t>(role.key_field) >= fields) return;
    OpKey key;
    std::memcpy(&key.bits, record + abi::kWord0Bytes + abi::kScalarSlotBytes * role.key_field, 8);
    if (role.is_begin) {
      on_begin(rules_[role.rule], key, run);
    } else {
      on_end(rules_[role.rule], key, run.ticks);
    }
    return;
  }
  // Left uninitialized: zeroing an array of string_views was half of this function's time.
  uint64_t bits[abi::kMaxFields];
  struct Text {
    const char* data;
    size_t size;
  } text[abi::kMaxFields];
  if (!fixed && e.layout.decode(
                    record, 0, run.size, [&](uint32_t f, uint64_t b) { bits[f] = b; },
                    [&](uint32_t f, std::string_view t) {
                      text[f] = {t.data(), t.size()};
                    }) == 0) {
    return;  // not a record of this layout (the walk passed it: cannot happen)
  }
  auto scalar = [&](int f) {
    if (!fixed) return bits[f];
    uint64_t b;
    std::memcpy(&b, record + abi::kWord0Bytes + abi::kScalarSlotBytes * f, 8);
    return b;
  };
  for (uint32_t i = 0; i < facts.roles; ++i) {
    const Role& role = roles_[facts.roles_at + i];
    Rule& rule = rules_[role.rule];
    const std::vector<int>& more = rule.resolved.more_key_fields[run.id];
    bool present = static_cast<uint32_t>(role.key_field) < fields;
    for (int f : more) present = present && static_cast<uint32_t>(f) < fields;
    if (!present) continue;
    OpKey key;
    if (role.one_scalar && e.layout.type(role.key_field) != abi::FieldType::kString) {
      key.bits = scalar(role.key_field);
    } else {
      std::string& k = buf_->key;
      k.clear();
      auto append = [&](int f) {
        if (e.layout.type(f) == abi::FieldType::kString) {
          k.push_back(static_cast<char>(text[f].size));
          k.append(text[f].data, text[f].size);
        } else {
          const uint64_t b = scalar(f);
          k.append(reinterpret_cast<const char*>(&b), 8);
        }
      };
      append(role.key_field);
      for (int f : more) append(f);
      key.is_text = true;
      key.text = k;
    }
    if (role.is_begin) {
      on_begin(rule, key, run);
    } else {
      on_end(rule, key, run.ticks);
    }
  }
}

// This pass's begins that did not end in it stay open: into the table, oldest first.
void ProcessFollower::open_pass_begins() {
  std::vector<std::pair<uint64_t, Rule::PassBegin>> left;
  for (Rule& rule : rules_) {
    left.clear();
    rule.pass_begins.for_each(
        [&](uint64_t key, const Rule::PassBegin& b) { left.emplace_back(key, b); });
    rule.pass_begins.clear();
    std::sort(left.begin(), left.end(),
              [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    for (const auto& [bits, b] : left) {
      OpKey key;
      key.bits = bits;
      OpenOperation* op = nullptr;
      rule.open->open(key, b.ticks, &op);
      op->pass_thread = b.thread;
      op->raw_at = b.raw_at;
      op->raw_len = b.raw_len;
      op->loss_mark = b.loss_mark;
    }
  }
}

// The details of the operations that stayed open, copied out of this pass's blocks.
void ProcessFollower::keep_fresh_details() {
  for (Rule& rule : rules_) {
    rule.open->take_fresh([&](OpenOperation& op) {
      const ThreadInfo& t = threads_[op.pass_thread];
      op.tid = t.tid;
      op.thread = t.name;
      op.raw.assign(reinterpret_cast<const char*>(buf_->blocks.data() + op.raw_at), op.raw_len);
      std::memcpy(&op.event, op.raw.data(), 2);
    });
  }
}

}  // namespace nanotrace::live
