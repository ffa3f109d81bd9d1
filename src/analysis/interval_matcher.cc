// IntervalMatcher: begin/end records paired by key value, per rule, with sequence gaps
// turned into lost-adjacent flags.
//
// A key is compared as bytes: the text of a string, the 8 bytes of any other value. Keys of
// 8 bytes (every scalar, and strings of exactly 8 bytes, which must meet the scalars with
// the same bytes) live in a flat table keyed by that word; other strings in a map by text.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "analysis/flat_key_map.hpp"
#include "nanotrace/intervals.hpp"

namespace nanotrace {

struct IntervalMatcher::Open {
  Interval interval;
  uint64_t loss_epoch = 0;  // gaps seen before it opened
  uint64_t order = 0;       // arrival, for finish()
};

struct IntervalMatcher::OpenSet {
  analysis::FlatKeyMap<Open> by_word;
  std::unordered_map<std::string, Open> by_text;
};

IntervalMatcher::IntervalMatcher(std::vector<ResolvedPair> rules)
    : rules_(std::move(rules)), counts_(rules_.size()) {
  for (size_t k = 0; k < rules_.size(); ++k) open_.push_back(std::make_unique<OpenSet>());
}

IntervalMatcher::~IntervalMatcher() = default;

void IntervalMatcher::note_sequence(const Record& r) {
  if (r.thread >= next_seq_.size()) next_seq_.resize(r.thread + 1, 0);
  uint64_t expected = next_seq_[r.thread] == 0 ? 0 : next_seq_[r.thread] - 1;
  if (r.seq > expected) note_loss(r.seq - expected);
  next_seq_[r.thread] = r.seq + 2;
}

void IntervalMatcher::note_loss(uint64_t records) {
  ++loss_epoch_;
  lost_seen_ += records;
}

const std::vector<IntervalMatch>& IntervalMatcher::add(const Record& r) {
  out_.clear();
  note_sequence(r);
  const uint16_t id = r.event->id;
  const bool kernel = r.event->is_kernel;
  for (uint32_t k = 0; k < rules_.size(); ++k) {
    const ResolvedPair& rule = rules_[k];
    const std::vector<uint8_t>& role = kernel ? rule.kernel_role : rule.role;
    if (id >= role.size() || role[id] == 0) continue;
    const int field = (kernel ? rule.kernel_key_field : rule.key_field)[id];
    const FieldValue& v = r.values[field];
    const bool begin = role[id] == 1;
    const std::vector<std::vector<int>>& more =
        kernel ? rule.kernel_more_key_fields : rule.more_key_fields;
    if (id < more.size() && !more[id].empty()) {
      // A key of several fields: their values one after the other, a string's with its
      // length first, so that different splits of the same bytes differ.
      key_bytes_.clear();
      auto append = [&](const FieldValue& f) {
        if (f.type == abi::FieldType::kString) {
          const auto n = static_cast<uint32_t>(f.text.size());
          key_bytes_.append(reinterpret_cast<const char*>(&n), sizeof(n));
          key_bytes_.append(f.text);
        } else {
          key_bytes_.append(reinterpret_cast<const char*>(&f.bits), sizeof(f.bits));
        }
      };
      append(v);
      for (int f : more[id]) append(r.values[f]);
      out_.push_back(match(k, begin, std::string_view(key_bytes_), r.time_ns, r.thread));
      continue;
    }
    out_.push_back(v.type == abi::FieldType::kString
                       ? match(k, begin, v.text, r.time_ns, r.thread)
                       : match(k, begin, v.bits, r.time_ns, r.thread));
  }
  return out_;
}

const IntervalMatch& IntervalMatcher::match(uint32_t rule, bool begin, uint64_t key,
                                            uint64_t time_ns, uint32_t thread) {
  return match_in(open_[rule]->by_word, rule, begin, key, time_ns, thread);
}

const IntervalMatch& IntervalMatcher::match(uint32_t rule, bool begin, std::string_view key_text,
                                            uint64_t time_ns, uint32_t thread) {
  if (key_text.size() == 8) {
    uint64_t word;
    std::memcpy(&word, key_text.data(), 8);
    return match_in(open_[rule]->by_word, rule, begin, word, time_ns, thread);
  }
  return match_in(open_[rule]->by_text, rule, begin, key_text, time_ns, thread);
}

namespace {

// Both maps behind one set of calls.
template <class V>
std::pair<V*, bool> find_or_insert(analysis::FlatKeyMap<V>& m, uint64_t key) {
  return m.find_or_insert(key);
}
template <class V>
std::pair<V*, bool> find_or_insert(std::unordered_map<std::string, V>& m, std::string_view key) {
  auto [it, inserted] = m.try_emplace(std::string(key));
  return {&it->second, inserted};
}
template <class V, class F>
bool take_open(analysis::FlatKeyMap<V>& m, uint64_t key, F&& f) {
  return m.take_with(key, f);
}
template <class V, class F>
bool take_open(std::unordered_map<std::string, V>& m, std::string_view key, F&& f) {
  auto it = m.find(std::string(key));
  if (it == m.end()) return false;
  f(it->second);
  m.erase(it);
  return true;
}

}  // namespace

template <class Map, class Key>
const IntervalMatch& IntervalMatcher::match_in(Map& open, uint32_t rule, bool begin, const Key& key,
                                               uint64_t time_ns, uint32_t thread) {
  IntervalCounts& c = counts_[rule];
  IntervalMatch& m = one_;
  m = IntervalMatch{};
  m.rule = rule;
  if (begin) {
    ++c.begins;
    m.kind = IntervalMatch::Kind::kBegin;
    auto [o, inserted] = find_or_insert(open, key);
    if (!inserted) {
      m.replaced = true;
      m.interval = o->interval;
      m.interval.lost_adjacent = o->loss_epoch != loss_epoch_;
      ++c.unmatched_begins;
      if (m.interval.lost_adjacent) ++c.lost_adjacent_unmatched;
      o->interval = Interval{};
    }
    // Filled in place: a copy of a fresh Open through the stack stalls on its own stores.
    o->interval.begin_ns = time_ns;
    o->interval.begin_thread = thread;
    o->loss_epoch = loss_epoch_;
    o->order = order_++;
    m.tag = &o->interval.tag;
    return m;
  }
  ++c.ends;
  const bool found = take_open(open, key, [&](const Open& o) {
    m.kind = IntervalMatch::Kind::kEnd;
    m.interval = o.interval;
    m.interval.end_ns = time_ns;
    m.interval.end_thread = thread;
    m.interval.lost_adjacent = o.loss_epoch != loss_epoch_;
  });
  if (found) {
    ++c.pairs;
    if (m.interval.lost_adjacent) ++c.lost_adjacent_pairs;
  } else {
    m.kind = IntervalMatch::Kind::kUnmatchedEnd;
    m.lost_adjacent = loss_epoch_ != 0;
    ++c.unmatched_ends;
    if (m.lost_adjacent) ++c.lost_adjacent_unmatched;
  }
  return m;
}

std::vector<std::pair<uint32_t, Interval>> IntervalMatcher::finish(uint64_t lost_total) {
  const bool unplaced = lost_total > lost_seen_;
  std::vector<std::pair<uint64_t, std::pair<uint32_t, Interval>>> left;
  for (uint32_t k = 0; k < open_.size(); ++k) {
    auto leave = [&](const Open& o) {
      Interval i = o.interval;
      i.lost_adjacent = unplaced || o.loss_epoch != loss_epoch_;
      ++counts_[k].unmatched_begins;
      if (i.lost_adjacent) ++counts_[k].lost_adjacent_unmatched;
      left.push_back({o.order, {k, i}});
    };
    open_[k]->by_word.for_each([&](uint64_t, const Open& o) { leave(o); });
    for (const auto& [key, o] : open_[k]->by_text) leave(o);
    open_[k]->by_word.clear();
    open_[k]->by_text.clear();
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
