// A duration trigger in the recorder (see duration_watch.hpp).
#include "record/duration_watch.hpp"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>

namespace nanotrace::rec {
namespace {

// Recent ends without a begin, kept for a begin drained after them.
constexpr size_t kRecentEnds = 4096;
// The recorder's table: as large as the traced process's.
constexpr size_t kOpenOperations = 16384;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int field_index(const EventInfo& e, const std::string& name) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Status DurationWatch::init(const Trigger& trigger, const Trace& trace) {
  const DurationRule& rule = *trigger.duration;
  bool begins = false, ends = false;
  roles_.assign(trace.events().size() + 2, Role{});
  for (const EventInfo& e : trace.events()) {
    if (e.is_guard || e.id >= roles_.size()) continue;
    const bool begin = e.full_name() == rule.begin_name();
    if (!begin && e.full_name() != rule.end_name()) continue;
    Role role;
    role.begin = begin;
    for (const std::string& k : rule.key) {
      const int f = field_index(e, k);
      if (f < 0) {
        return Status::NotFound("event " + e.full_name() + " has no field '" + k + "' (the key)");
      }
      role.key_fields.push_back(f);
    }
    role.hashed =
        rule.key.size() > 1 || e.fields[role.key_fields[0]].type == abi::FieldType::kString;
    roles_[e.id] = role;
    (begin ? begins : ends) = true;
  }
  if (!begins || !ends) {
    return Status::NotFound("no event " + (begins ? rule.end_name() : rule.begin_name()));
  }
  trace_ = &trace;
  rule_ = std::make_unique<DurationRule>(rule);
  table_ = std::make_unique<pairing::OpenTable>(kOpenOperations);
  if (!table_->ok()) return Status::IoError("no memory for the table of open operations");
  if (rule.adaptive()) {
    sliding_ =
        std::make_unique<pairing::SlidingPercentile>(rule.factor, rule.percentile, rule.warmup);
    histogram_.assign(pairing::DurationHistogram::kBuckets, 0);
  }
  limiter_ = std::make_unique<pairing::FireLimiter>(rule.limits.cap, rule.limits.per_ns,
                                                    rule.limits.cooldown_ns);
  return Status::Ok();
}

uint64_t DurationWatch::key_of(const Role& role, const Record& r) const {
  const FieldValue& first = r.values[role.key_fields[0]];
  if (!role.hashed) return first.bits;
  return pairing::hash_key_fields(r.values, role.key_fields);
}

double DurationWatch::ticks_ms(uint64_t ticks) const {
  const uint64_t tps = trace_->process().ticks_per_second;
  return static_cast<double>(ticks) * 1e3 / static_cast<double>(tps == 0 ? 1000000000 : tps);
}

uint64_t DurationWatch::threshold_ticks() {
  const uint64_t tps = trace_->process().ticks_per_second;
  const double per_ns = static_cast<double>(tps == 0 ? 1000000000 : tps) / 1e9;
  if (!sliding_) return static_cast<uint64_t>(static_cast<double>(rule_->threshold_ns) * per_ns);
  const uint64_t now = monotonic_ns();
  const uint64_t epoch =
      std::max<uint64_t>(rule_->window_ns / pairing::SlidingPercentile::kEpochs, 1000000);
  if (next_epoch_ns_ == 0) next_epoch_ns_ = now + epoch;
  while (now >= next_epoch_ns_) {
    sliding_->close_epoch(histogram_.data());
    next_epoch_ns_ += epoch;
  }
  return sliding_->threshold();
}

bool DurationWatch::admit() { return limiter_->admit(monotonic_ns()); }

// A stream that lost records (overwritten before the recorder read them) may have lost ends:
// what is open is forgotten, counted as not seen in time.
void DurationWatch::note_losses(const StreamState& st) {
  uint64_t& seen = overwritten_[uint64_t{st.slot} << 32 | st.generation];
  if (st.overwritten <= seen) return;
  seen = st.overwritten;
  uint64_t open = 0;
  table_->for_each([&](size_t, const pairing::OpenOp&) { ++open; });
  unseen_ += open;
  table_->clear();
}

bool DurationWatch::on_record(const Record& r, const StreamState& st) {
  if (!rule_ || r.event == nullptr || r.event->is_kernel || r.event->id >= roles_.size()) {
    return false;
  }
  const Role& role = roles_[r.event->id];
  if (role.key_fields.empty()) return false;
  note_losses(st);
  const uint64_t key = key_of(role, r);
  if (role.begin) {
    // An end of this key drained earlier, written after this begin: the pair is complete.
    if (auto it = recent_ends_.find(key); it != recent_ends_.end() && it->second >= r.ticks) {
      recent_ends_.erase(it);
      --unmatched_ends_;
      ++pairs_;
      return false;  // its duration is known only as at most the end's; not a slow match
    }
    pairing::OpenOp op{key, (r.ticks << 16) | r.event->id,
                       pairing::OpenOp::where_of(st.slot, r.seq), st.tid};
    pairing::OpenOp dropped;
    auto result = table_->begin(op, &dropped);
    if (result == pairing::OpenTable::Begin::kReplaced) ++replaced_;
    if (result == pairing::OpenTable::Begin::kEvicted) ++evicted_;
    return false;
  }
  pairing::OpenOp begun;
  if (table_->end(key, &begun) != pairing::OpenTable::End::kMatched) {
    ++unmatched_ends_;
    recent_ends_[key] = r.ticks;
    recent_order_.push_back(key);
    if (recent_order_.size() > kRecentEnds) {
      recent_ends_.erase(recent_order_.front());
      recent_order_.pop_front();
    }
    return false;
  }
  ++pairs_;
  const uint64_t begin = begun.begin_full(r.ticks);
  const uint64_t ticks = r.ticks > begin ? r.ticks - begin : 0;
  if (sliding_) ++histogram_[pairing::DurationHistogram::bucket(ticks)];
  if (rule_->open) return false;
  const uint64_t threshold = threshold_ticks();
  if (ticks <= threshold || !admit()) return false;
  match_ = fmt::format(
      "record {} ({} {}) of thread {}, the end of a pair begun by record {} of thread {}, "
      "{:.3f} ms (> {:.3f} ms)",
      r.seq, r.event->full_name(), format_fields(r), st.tid, begun.seq(), begun.tid,
      ticks_ms(ticks), ticks_ms(threshold));
  return true;
}

bool DurationWatch::age(uint64_t now) {
  if (!rule_ || !rule_->open) return false;
  const uint64_t threshold = threshold_ticks();
  if (threshold == pairing::SlidingPercentile::kWarmingUp) return false;
  size_t index = 0;
  pairing::OpenOp oldest;
  uint64_t stuck = 0;
  table_->for_each([&](size_t i, const pairing::OpenOp& op) {
    const uint64_t begin = op.begin_full(now);
    if (op.reported() || now <= begin || now - begin <= threshold) return;
    if (stuck++ == 0 || begin < oldest.begin_full(now)) {
      index = i;
      oldest = op;
    }
  });
  if (stuck == 0) return false;
  // One incident: every operation open past the threshold now is named once.
  table_->for_each([&](size_t i, const pairing::OpenOp& op) {
    const uint64_t begin = op.begin_full(now);
    if (!op.reported() && now > begin && now - begin > threshold) {
      table_->mark_reported(i, op);
    }
  });
  (void)index;
  if (!admit()) return false;
  const EventInfo* e = trace_->event_by_id(oldest.event());
  match_ =
      fmt::format("record {} ({}, {} {}) of thread {}, an operation open {:.3f} ms (> {:.3f} ms){}",
                  oldest.seq(), e ? e->full_name() : "?", rule_->key_text(), oldest.key, oldest.tid,
                  ticks_ms(now - oldest.begin_full(now)), ticks_ms(threshold),
                  stuck > 1 ? fmt::format("; {} operations open past the threshold", stuck) : "");
  return true;
}

std::string DurationWatch::counts() const {
  return fmt::format(
      "{} pairs, {} ends without a begin, {} begins replaced, {} evicted, {} not seen in time, "
      "{} fires, {} held back",
      pairs_, unmatched_ends_, replaced_, evicted_, unseen_, limiter_ ? limiter_->fired() : 0,
      limiter_ ? limiter_->held_back() : 0);
}

}  // namespace nanotrace::rec
