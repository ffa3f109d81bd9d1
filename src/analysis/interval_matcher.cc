// IntervalMatcher: begin/end records paired by key value, per rule, with sequence gaps
// turned into lost-adjacent flags.
#include <algorithm>

#include "nanotrace/intervals.hpp"

namespace nanotrace {
namespace {

// The key as map bytes: the text of a string, the 8 bytes of any other value.
void key_bytes(const FieldValue& v, std::string* out) {
  if (v.type == abi::FieldType::kString) {
    out->assign(v.text);
  } else {
    out->assign(reinterpret_cast<const char*>(&v.bits), 8);
  }
}

}  // namespace

IntervalMatcher::IntervalMatcher(std::vector<ResolvedPair> rules)
    : rules_(std::move(rules)), open_(rules_.size()), counts_(rules_.size()) {}

IntervalMatcher::~IntervalMatcher() = default;

void IntervalMatcher::note_sequence(const Record& r) {
  if (r.thread >= next_seq_.size()) next_seq_.resize(r.thread + 1, 0);
  uint64_t expected = next_seq_[r.thread] == 0 ? 0 : next_seq_[r.thread] - 1;
  if (r.seq > expected) {
    ++loss_epoch_;
    lost_seen_ += r.seq - expected;
  }
  next_seq_[r.thread] = r.seq + 2;
}

const std::vector<IntervalMatch>& IntervalMatcher::add(const Record& r) {
  out_.clear();
  note_sequence(r);
  const uint16_t id = r.event->id;
  for (uint32_t k = 0; k < rules_.size(); ++k) {
    const ResolvedPair& rule = rules_[k];
    if (id >= rule.role.size() || rule.role[id] == 0) continue;
    IntervalCounts& c = counts_[k];
    key_bytes(r.values[rule.key_field[id]], &key_);
    IntervalMatch m;
    m.rule = k;
    if (rule.role[id] == 1) {
      ++c.begins;
      m.kind = IntervalMatch::Kind::kBegin;
      Open fresh{{r.time_ns, 0, r.thread, 0, 0, false}, loss_epoch_, order_++};
      auto [it, inserted] = open_[k].try_emplace(key_, fresh);
      if (!inserted) {
        m.replaced = true;
        m.interval = it->second.interval;
        m.interval.lost_adjacent = it->second.loss_epoch != loss_epoch_;
        ++c.unmatched_begins;
        if (m.interval.lost_adjacent) ++c.lost_adjacent_unmatched;
        it->second = fresh;
      }
      m.tag = &it->second.interval.tag;
    } else {
      ++c.ends;
      auto it = open_[k].find(key_);
      if (it == open_[k].end()) {
        m.kind = IntervalMatch::Kind::kUnmatchedEnd;
        m.lost_adjacent = loss_epoch_ != 0;
        ++c.unmatched_ends;
        if (m.lost_adjacent) ++c.lost_adjacent_unmatched;
      } else {
        m.kind = IntervalMatch::Kind::kEnd;
        m.interval = it->second.interval;
        m.interval.end_ns = r.time_ns;
        m.interval.end_thread = r.thread;
        m.interval.lost_adjacent = it->second.loss_epoch != loss_epoch_;
        open_[k].erase(it);
        ++c.pairs;
        if (m.interval.lost_adjacent) ++c.lost_adjacent_pairs;
      }
    }
    out_.push_back(m);
  }
  return out_;
}

std::vector<std::pair<uint32_t, Interval>> IntervalMatcher::finish(uint64_t lost_total) {
  const bool unplaced = lost_total > lost_seen_;
  std::vector<std::pair<uint64_t, std::pair<uint32_t, Interval>>> left;
  for (uint32_t k = 0; k < open_.size(); ++k) {
    for (auto& [key, o] : open_[k]) {
      Interval i = o.interval;
      i.lost_adjacent = unplaced || o.loss_epoch != loss_epoch_;
      ++counts_[k].unmatched_begins;
      if (i.lost_adjacent) ++counts_[k].lost_adjacent_unmatched;
      left.push_back({o.order, {k, i}});
    }
    open_[k].clear();
    // Every unmatched record, the ones counted on the way included.
    IntervalCounts& c = counts_[k];
    if (unplaced) c.lost_adjacent_unmatched = c.unmatched_begins + c.unmatched_ends;
  }
  std::sort(left.begin(), left.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<uint32_t, Interval>> out;
  out.reserve(left.size());
  for (auto& l : left) out.push_back(l.second);
  return out;
}

}  // namespace nanotrace
