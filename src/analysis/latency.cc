// Latency of begin/end pairs: PairMatcher (latencies of the pairs an IntervalMatcher finds),
// exact nearest-rank percentiles and a log2 histogram over all matched latencies, the
// slowest pairs, splitting by a field of the begin event, and pair rules inferred from
// event names.
//
// Memory: 8 bytes per matched pair (the latency) plus one map entry per open interval; the
// slowest-N list is a heap of N entries.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>
#include <unordered_map>

#include "nanotrace/analysis.hpp"
#include "nanotrace/intervals.hpp"

namespace nanotrace {

LatencyStats compute_latency_stats(std::vector<uint64_t>* v) {
  LatencyStats s;
  s.count = v->size();
  if (v->empty()) return s;
  std::sort(v->begin(), v->end());
  auto rank = [&](double p) {
    // Nearest rank: the smallest value with at least p% of the values at or below it.
    auto k = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(s.count)));
    if (k == 0) k = 1;
    if (k > s.count) k = s.count;
    return (*v)[k - 1];
  };
  s.min_ns = v->front();
  s.max_ns = v->back();
  s.p50_ns = rank(50);
  s.p90_ns = rank(90);
  s.p99_ns = rank(99);
  s.p999_ns = rank(99.9);
  long double sum = 0;
  for (uint64_t x : *v) sum += x;
  s.mean_ns = static_cast<double>(sum / s.count);
  auto bucket = [](uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); };
  int lo = bucket(s.min_ns), hi = bucket(s.max_ns);
  s.histogram.resize(hi - lo + 1);
  for (int b = lo; b <= hi; ++b) {
    HistogramBucket& h = s.histogram[b - lo];
    h.lo_ns = b == 0 ? 0 : uint64_t{1} << (b - 1);
    h.hi_ns = b >= 64 ? UINT64_MAX : uint64_t{1} << b;
  }
  for (uint64_t x : *v) ++s.histogram[bucket(x) - lo].count;
  return s;
}

namespace {

struct Group {
  std::string value;
  std::vector<uint64_t> latencies;
  uint64_t unmatched_begins = 0;
};

struct Slow {
  uint64_t latency_ns;
  uint64_t begin_ns;
  uint32_t thread;
  uint32_t group;
  std::string key;
  bool operator>(const Slow& o) const { return latency_ns > o.latency_ns; }
};

}  // namespace

// Pairs come from an IntervalMatcher of the one rule; each open interval's tag is the index
// of its --by group.
struct PairMatcher::Impl {
  const Trace* trace = nullptr;
  std::unique_ptr<IntervalMatcher> intervals;
  std::string by;
  std::vector<int> by_field;  // per event id, for begin events
  uint32_t top = 0;
  std::vector<Group> groups;
  std::unordered_map<std::string, uint32_t> group_index;
  std::vector<uint64_t> all;
  std::priority_queue<Slow, std::vector<Slow>, std::greater<Slow>> slowest;
  std::vector<std::pair<uint32_t, std::string>> thread_names;  // tid, name
  std::vector<uint32_t> thread_pids;
  uint64_t records = 0;
  std::string scratch;
};

PairMatcher::PairMatcher() : impl_(std::make_unique<Impl>()) {}
PairMatcher::~PairMatcher() = default;

Result<std::unique_ptr<PairMatcher>> PairMatcher::create(const Trace& trace, const PairRule& rule,
                                                         const std::string& by, uint32_t top) {
  auto resolved = resolve_pair(trace, rule);
  if (!resolved.ok()) return resolved.status();
  std::unique_ptr<PairMatcher> m(new PairMatcher());
  Impl& d = *m->impl_;
  d.trace = &trace;
  d.by = by;
  d.top = top;
  d.by_field.assign(resolved->role.size(), -1);
  if (!by.empty()) {
    for (uint16_t id : resolved->begin_ids) {
      const EventInfo* e = trace.event_by_id(id);
      for (size_t f = 0; f < e->fields.size(); ++f) {
        if (e->fields[f].name == by) d.by_field[id] = static_cast<int>(f);
      }
      if (d.by_field[id] < 0) {
        std::vector<std::string> names;
        for (const FieldInfo& f : e->fields) names.push_back(f.name);
        return Status::NotFound(
            fmt::format("--by: begin event {} has no field '{}' (its fields: {})", e->full_name(),
                        by, fmt::join(names, ", ")));
      }
    }
  }
  std::vector<ResolvedPair> rules;
  rules.push_back(std::move(*resolved));
  d.intervals = std::make_unique<IntervalMatcher>(std::move(rules));
  if (by.empty()) d.groups.push_back({"", {}, 0});
  return m;
}

void PairMatcher::add(const Record& r, const std::vector<ThreadStats>& threads) {
  Impl& d = *impl_;
  ++d.records;
  const std::vector<IntervalMatch>& matches = d.intervals->add(r);
  if (matches.empty()) return;
  if (d.thread_names.empty()) {
    for (const ThreadStats& t : threads) {
      d.thread_names.emplace_back(t.info.tid, t.info.name);
      d.thread_pids.push_back(t.info.pid);
    }
  }
  const IntervalMatch& m = matches.front();
  const uint16_t id = r.event->id;
  if (m.kind == IntervalMatch::Kind::kBegin) {
    if (m.replaced) ++d.groups[m.interval.tag].unmatched_begins;
    uint32_t g = 0;
    if (d.by_field[id] >= 0) {
      d.scratch = format_value(display_value(r, static_cast<uint32_t>(d.by_field[id])));
      auto [it, inserted] =
          d.group_index.try_emplace(d.scratch, static_cast<uint32_t>(d.groups.size()));
      if (inserted) d.groups.push_back({d.scratch, {}, 0});
      g = it->second;
    }
    *m.tag = g;
    return;
  }
  if (m.kind != IntervalMatch::Kind::kEnd) return;
  const Interval& i = m.interval;
  uint64_t lat = i.latency_ns();
  d.groups[i.tag].latencies.push_back(lat);
  d.all.push_back(lat);
  if (d.top > 0 && (d.slowest.size() < d.top || lat > d.slowest.top().latency_ns)) {
    const FieldValue& k = r.values[d.intervals->rules()[0].key_field[id]];
    d.slowest.push(
        Slow{lat, i.begin_ns, i.begin_thread, static_cast<uint32_t>(i.tag), format_value(k)});
    if (d.slowest.size() > d.top) d.slowest.pop();
  }
}

const std::vector<uint64_t>& PairMatcher::latencies() const { return impl_->all; }

LatencyReport PairMatcher::finish(uint64_t lost_total) {
  Impl& d = *impl_;
  LatencyReport rep;
  rep.rule = d.intervals->rules()[0].rule;
  rep.by = d.by;
  rep.records = d.records;
  for (const auto& [rule, open] : d.intervals->finish(lost_total)) {
    ++d.groups[open.tag].unmatched_begins;
  }
  const IntervalCounts& c = d.intervals->counts(0);
  rep.begins = c.begins;
  rep.ends = c.ends;
  rep.unmatched_ends = c.unmatched_ends;
  rep.lost_adjacent_pairs = c.lost_adjacent_pairs;
  rep.lost_adjacent_unmatched = c.lost_adjacent_unmatched;
  uint64_t unmatched_begins = 0;
  for (Group& g : d.groups) {
    unmatched_begins += g.unmatched_begins;
    if (d.by.empty()) continue;
    LatencyStats s = compute_latency_stats(&g.latencies);
    s.by_value = g.value;
    s.unmatched_begins = g.unmatched_begins;
    rep.groups.push_back(std::move(s));
  }
  std::stable_sort(rep.groups.begin(), rep.groups.end(),
                   [](const LatencyStats& a, const LatencyStats& b) { return a.count > b.count; });
  std::vector<uint64_t> all = std::move(d.all);
  rep.overall = compute_latency_stats(&all);
  rep.overall.unmatched_begins = unmatched_begins;
  while (!d.slowest.empty()) {
    const Slow& s = d.slowest.top();
    SlowPair p;
    p.latency_ns = s.latency_ns;
    p.begin_ns = s.begin_ns;
    p.begin_realtime_ns = d.trace->process().clock_start.realtime_ns + s.begin_ns;
    if (s.thread < d.thread_names.size()) {
      p.tid = d.thread_names[s.thread].first;
      p.pid = d.thread_pids[s.thread];
      p.thread = d.thread_names[s.thread].second;
    }
    p.key = s.key;
    p.by_value = d.groups[s.group].value;
    rep.top.push_back(std::move(p));
    d.slowest.pop();
  }
  std::reverse(rep.top.begin(), rep.top.end());
  return rep;
}

Result<LatencyReport> analyze_latency(Trace& trace, const LatencyOptions& options) {
  auto matcher = PairMatcher::create(trace, options.rule, options.by, options.top);
  if (!matcher.ok()) return matcher.status();
  auto source = trace.read_all();
  const std::vector<ThreadStats>& threads = source->threads();
  Record r;
  while (source->next(&r)) (*matcher)->add(r, threads);
  uint64_t lost = 0, corrupt_blocks = 0;
  for (const ThreadStats& t : threads) {
    lost += t.lost();
    corrupt_blocks += t.corrupt_blocks;
  }
  LatencyReport rep = (*matcher)->finish(lost);
  rep.lost = lost;
  rep.corrupt_blocks = corrupt_blocks;
  if (rep.records == 0) {
    return Status::NotFound(fmt::format("the trace of process {} ({}) holds no records",
                                        trace.process().pid, trace.process().path));
  }
  if (rep.overall.count == 0) {
    return Status::NotFound(fmt::format(
        "no {} -> {} pair matched on '{}' ({} begin records, {} end records in {} records)",
        options.rule.begin, options.rule.end, options.rule.key, rep.begins, rep.ends, rep.records));
  }
  return rep;
}

std::vector<PairRule> infer_pairs(const Trace& trace) {
  static const std::pair<const char*, const char*> kSuffixes[] = {
      {"_start", "_end"}, {"_begin", "_end"}, {"_start", "_stop"}};
  static const std::pair<const char*, const char*> kNames[] = {
      {"start", "stop"}, {"begin", "end"}, {"submit", "complete"}, {"start", "end"}};
  std::vector<PairRule> rules;
  const std::vector<EventInfo>& events = trace.events();
  auto find = [&](const std::string& group, const std::string& name) -> const EventInfo* {
    for (const EventInfo& e : events) {
      if (!e.is_guard && e.group == group && e.name == name) return &e;
    }
    return nullptr;
  };
  auto add = [&](const EventInfo& b, const EventInfo& e) {
    for (const FieldInfo& f : b.fields) {
      for (const FieldInfo& g : e.fields) {
        if (f.name != g.name) continue;
        PairRule rule{b.full_name(), e.full_name(), f.name};
        for (const PairRule& r : rules) {
          if (r.begin == rule.begin && r.end == rule.end) return;
        }
        rules.push_back(rule);
        return;
      }
    }
  };
  for (const EventInfo& b : events) {
    if (b.is_guard) continue;
    for (const auto& [bs, es] : kSuffixes) {
      size_t n = std::strlen(bs);
      if (b.name.size() > n && b.name.compare(b.name.size() - n, n, bs) == 0) {
        const EventInfo* e = find(b.group, b.name.substr(0, b.name.size() - n) + es);
        if (e) add(b, *e);
      }
    }
    for (const auto& [bn, en] : kNames) {
      if (b.name == bn) {
        const EventInfo* e = find(b.group, en);
        if (e) add(b, *e);
      }
    }
  }
  return rules;
}

}  // namespace nanotrace
