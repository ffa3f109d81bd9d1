// Latency of begin/end pairs: PairMatcher (latencies of the pairs an IntervalMatcher finds),
// exact nearest-rank percentiles and a log2 histogram over all matched latencies, the
// slowest pairs, splitting by a field of the begin event, and pair rules inferred from
// event names.
//
// analyze_latency reads the trace as columns of the rule's two events and only the fields it
// needs (ColumnReader), and feeds the matcher row by row in stream order, sequence gaps
// included: the same pairs as records fed one by one, without decoding every record.
//
// Memory: 8 bytes per matched pair (the latency, in a ColumnArray: no copies as it grows)
// plus one table slot per open interval and a batch of columns; the slowest-N list is a heap
// of N entries.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <queue>
#include <unordered_map>

#include "nanotrace/analysis.hpp"
#include "nanotrace/columns.hpp"
#include "nanotrace/intervals.hpp"

namespace nanotrace {

LatencyStats compute_latency_stats(std::vector<uint64_t>* latencies) {
  return compute_latency_stats(std::span<uint64_t>(*latencies));
}

namespace {

// The stats of latencies held as T (uint64_t, or uint32_t when they all fit).
template <class T>
LatencyStats stats_of(std::span<T> v) {
  LatencyStats s;
  s.count = v.size();
  if (v.empty()) return s;
  auto bucket = [](uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); };
  // One pass for the extremes, the sum and the histogram; selection rather than a sort for
  // the ranks (a sort of millions of latencies cost more than matching them).
  uint64_t counts[65] = {};
  unsigned __int128 sum = 0;
  s.min_ns = s.max_ns = v.front();
  for (const uint64_t x : v) {
    s.min_ns = x < s.min_ns ? x : s.min_ns;
    s.max_ns = x > s.max_ns ? x : s.max_ns;
    sum += x;
    ++counts[bucket(x)];
  }
  if (sum >> 64 == 0) {
    // Exact, as the long double sum of the values in any order is below 2^64.
    s.mean_ns = static_cast<double>(static_cast<long double>(static_cast<uint64_t>(sum)) / s.count);
  } else {
    // Inexact: the rounding of the sum depends on the order, which is ascending.
    std::sort(v.begin(), v.end());
    long double total = 0;
    for (const uint64_t x : v) total += x;
    s.mean_ns = static_cast<double>(total / s.count);
  }
  auto index = [&](double p) {
    // Nearest rank: the smallest value with at least p% of the values at or below it.
    auto k = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(s.count)));
    if (k == 0) k = 1;
    if (k > s.count) k = s.count;
    return k - 1;
  };
  const double percents[] = {50, 90, 99, 99.9};
  uint64_t* const ranks[] = {&s.p50_ns, &s.p90_ns, &s.p99_ns, &s.p999_ns};
  auto from = v.begin();  // everything before is at or below the last rank placed
  for (int r = 0; r < 4; ++r) {
    auto at = v.begin() + static_cast<ptrdiff_t>(index(percents[r]));
    if (at >= from) {
      std::nth_element(from, at, v.end());
      from = at + 1;
    }
    *ranks[r] = *at;
  }
  int lo = bucket(s.min_ns), hi = bucket(s.max_ns);
  s.histogram.resize(hi - lo + 1);
  for (int b = lo; b <= hi; ++b) {
    HistogramBucket& h = s.histogram[b - lo];
    h.lo_ns = b == 0 ? 0 : uint64_t{1} << (b - 1);
    h.hi_ns = b >= 64 ? UINT64_MAX : uint64_t{1} << b;
    h.count = counts[b];
  }
  return s;
}

}  // namespace

LatencyStats compute_latency_stats(std::span<uint64_t> v) { return stats_of(v); }

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
  uint32_t task;  // a kernel begin record's task (0: a user record, or idle/interrupt)
  std::string key;
  bool operator>(const Slow& o) const { return latency_ns > o.latency_ns; }
};

}  // namespace

// Pairs come from an IntervalMatcher of the one rule; each open interval's tag holds the index
// of its --by group in its low half and, for a kernel begin record, the task it ran in above.
static uint32_t group_of_tag(uint64_t tag) { return static_cast<uint32_t>(tag); }
static uint32_t task_of_tag(uint64_t tag) { return static_cast<uint32_t>(tag >> 32); }

struct PairMatcher::Impl {
  const Trace* trace = nullptr;
  std::unique_ptr<IntervalMatcher> intervals;
  std::string by;
  std::vector<int> by_field;         // per event id, for begin events
  std::vector<int> kernel_by_field;  // per kernel event id
  uint32_t top = 0;
  std::vector<Group> groups;
  std::unordered_map<std::string, uint32_t> group_index;
  // Every matched latency, in arrival order, 4 bytes each while they all fit (fresh memory
  // costs more than the matching: half as much of it), else 8 (`wide`). Grow without
  // copies, on huge pages. all64 is also made from narrow when latencies() is asked.
  ColumnArray<uint32_t> narrow;
  ColumnArray<uint64_t> all64;
  bool wide = false;

  void add_latency(uint64_t lat) {
    if (wide) {
      all64.push_back(lat);
    } else if (lat <= UINT32_MAX) {
      narrow.push_back(static_cast<uint32_t>(lat));
    } else {
      widen();
      all64.push_back(lat);
    }
  }
  // Moves the latencies into all64 for good.
  void widen() {
    if (wide) return;
    all64.clear();
    all64.reserve(narrow.size() + 1);
    for (uint32_t x : narrow) all64.push_back(x);
    narrow = ColumnArray<uint32_t>();
    wide = true;
  }
  std::priority_queue<Slow, std::vector<Slow>, std::greater<Slow>> slowest;
  std::vector<std::pair<uint32_t, std::string>> thread_names;  // tid, name
  std::vector<uint32_t> thread_pids;
  uint64_t records = 0;
  std::string scratch;
  std::string key_text;  // a key of several fields, shown

  void name_threads(const std::vector<ThreadStats>& threads) {
    if (!thread_names.empty()) return;
    for (const ThreadStats& t : threads) {
      thread_names.emplace_back(t.info.tid, t.info.name);
      thread_pids.push_back(t.info.pid);
    }
  }

  // The --by group of a begin record whose by field shows `shown` (display_value).
  uint32_t group_of(const FieldValue& shown) {
    scratch = format_value(shown);
    auto [it, inserted] = group_index.try_emplace(scratch, static_cast<uint32_t>(groups.size()));
    if (inserted) groups.push_back({scratch, {}, 0});
    return it->second;
  }

  // A begin opened an interval of group g (and may have ended an unmatched one).
  void began(const IntervalMatch& m, uint32_t g, uint32_t task) {
    if (m.replaced) ++groups[group_of_tag(m.interval.tag)].unmatched_begins;
    *m.tag = g | static_cast<uint64_t>(task) << 32;
  }

  // A pair ended; key() gives the end record's key value, for the slowest pairs.
  template <class KeyOf>
  void ended(const IntervalMatch& m, const KeyOf& key) {
    const Interval& i = m.interval;
    uint64_t lat = i.latency_ns();
    if (!by.empty()) groups[group_of_tag(i.tag)].latencies.push_back(lat);
    add_latency(lat);
    if (top > 0 && (slowest.size() < top || lat > slowest.top().latency_ns)) {
      slowest.push(Slow{lat, i.begin_ns, i.begin_thread, group_of_tag(i.tag), task_of_tag(i.tag),
                        format_value(key())});
      if (slowest.size() > top) slowest.pop();
    }
  }
};

PairMatcher::PairMatcher() : impl_(std::make_unique<Impl>()) {}
PairMatcher::~PairMatcher() = default;

Result<std::unique_ptr<PairMatcher>> PairMatcher::create(const Trace& trace, const PairRule& rule,
                                                         const std::string& by, uint32_t top) {
  auto resolved = resolve_pair_with_kernel(trace, rule);
  if (!resolved.ok()) return resolved.status();
  std::unique_ptr<PairMatcher> m(new PairMatcher());
  Impl& d = *m->impl_;
  d.trace = &trace;
  d.by = by;
  d.top = top;
  d.by_field.assign(resolved->role.size(), -1);
  d.kernel_by_field.assign(resolved->kernel_role.size(), -1);
  std::vector<std::pair<const EventInfo*, int*>> begins;
  for (uint16_t id : resolved->begin_ids)
    begins.push_back({trace.event_by_id(id), &d.by_field[id]});
  for (uint16_t id : resolved->kernel_begin_ids) {
    begins.push_back({&trace.kernel_events()[id], &d.kernel_by_field[id]});
  }
  if (!by.empty()) {
    for (auto [e, by_field] : begins) {
      for (size_t f = 0; f < e->fields.size(); ++f) {
        if (e->fields[f].name == by) *by_field = static_cast<int>(f);
      }
      if (*by_field < 0) {
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
  d.name_threads(threads);
  const IntervalMatch& m = matches.front();
  const uint16_t id = r.event->id;
  const bool kernel = r.event->is_kernel;
  if (m.kind == IntervalMatch::Kind::kBegin) {
    const int f = (kernel ? d.kernel_by_field : d.by_field)[id];
    d.began(m, f >= 0 ? d.group_of(display_value(r, static_cast<uint32_t>(f))) : 0,
            kernel ? r.task : 0);
  } else if (m.kind == IntervalMatch::Kind::kEnd) {
    const ResolvedPair& rule = d.intervals->rules()[0];
    const int key = (kernel ? rule.kernel_key_field : rule.key_field)[id];
    const std::vector<int>& more =
        (kernel ? rule.kernel_more_key_fields : rule.more_key_fields)[id];
    if (more.empty()) {
      d.ended(m, [&] { return r.values[key]; });
    } else {
      // The key's fields as one text, "8:1+2048".
      d.ended(m, [&] {
        d.key_text = format_value(r.values[key]);
        for (int f : more) {
          d.key_text.push_back('+');
          d.key_text.append(format_value(r.values[f]));
        }
        FieldValue v;
        v.type = abi::FieldType::kString;
        v.text = d.key_text;
        return v;
      });
    }
  }
}

namespace {

// Rows per batch: a column of a batch stays within the first 256 KiB of its ColumnArray,
// faulted in ahead in small pages, instead of reaching a huge page to zero (2 MiB each).
constexpr size_t kBatchRows = 16 << 10;

// One table of a batch as the matching loop reads it.
struct PairTable {
  const EventTable* table;
  const uint64_t* time_ns;
  const uint32_t* thread;
  const uint16_t* event;     // null: every row is ids[0]
  const FieldColumn* key;    // null: the table's event is not in the rule
  const FieldColumn* by;     // null: no --by
  const uint64_t* key_bits;  // null: a string key
  bool begin;
};

// One PairTable per table of the batch, in its order: where the rule's key and the --by field
// (by, by_field: per event id) are, and whether the table's event begins a pair.
void bind_pair_tables(const ColumnSet& batch, const ResolvedPair& rule, const std::string& by,
                      const std::vector<int>& by_field, std::vector<PairTable>* tables) {
  tables->clear();
  for (const EventTable& t : batch.tables) {
    // Every id of a table has one full name and field layout: one role, one key field.
    const uint16_t id = t.ids[0];
    PairTable p{&t, t.time_ns.data(), t.thread.data(), nullptr, nullptr, nullptr, nullptr, false};
    if (t.ids.size() > 1) p.event = t.event.data();
    auto column = [&](const std::string& name) -> const FieldColumn* {
      for (const FieldColumn& f : t.fields) {
        if (f.info.name == name) return &f;
      }
      return nullptr;
    };
    if (id < rule.role.size() && rule.role[id] != 0) {
      p.key = column(rule.rule.key);  // present: resolve_pair found it in every event
      if (p.key != nullptr && !p.key->is_string()) p.key_bits = p.key->bits.data();
      p.begin = rule.role[id] == 1;
      if (p.begin && by_field[id] >= 0) p.by = column(by);
    }
    tables->push_back(p);
  }
}

// The batch's records in time order: rows[pos] = table << 32 | row of the record at position
// first + pos.
void order_rows(const std::vector<PairTable>& tables, uint64_t first, uint64_t count,
                std::vector<uint64_t>* rows) {
  rows->resize(count);
  for (uint32_t k = 0; k < tables.size(); ++k) {
    const EventTable& t = *tables[k].table;
    const uint64_t* order = t.order.data();
    for (uint32_t i = 0; i < t.rows(); ++i) (*rows)[order[i] - first] = uint64_t{k} << 32 | i;
  }
}

}  // namespace

std::vector<ThreadStats> PairMatcher::add_all(Trace& trace) {
  Impl& d = *impl_;
  IntervalMatcher& matcher = *d.intervals;
  const ResolvedPair& rule = matcher.rules()[0];
  if (rule.has_kernel() || rule.composite_key()) {
    // Kernel records come merged in by time from read_all_with_kernel (the columns hold user
    // events only), and a key of several fields is composed by IntervalMatcher::add.
    auto records = trace.read_all_with_kernel();
    Record r;
    while (records->next(&r)) add(r, records->threads());
    return records->threads();
  }
  ColumnOptions options;
  options.events = {rule.rule.begin, rule.rule.end};
  options.row_order = true;
  options.fields = {rule.rule.key};
  if (!d.by.empty()) options.fields.push_back(d.by);
  auto reader = ColumnReader::open(trace, options);
  if (!reader.ok()) return {};  // cannot happen: the rule's events were resolved
  ColumnSet batch;
  std::vector<PairTable> tables;
  std::vector<uint64_t> rows;  // per position in the batch: table << 32 | row
  uint64_t first = 0;          // position of the batch's first row
  bool more = true;
  while (more) {
    more = (*reader)->next(&batch, kBatchRows);
    if (batch.rows > 0) d.name_threads(batch.threads);
    bind_pair_tables(batch, rule, d.by, d.by_field, &tables);
    order_rows(tables, first, batch.rows, &rows);
    size_t gap = 0;
    for (uint64_t pos = 0; pos < batch.rows; ++pos) {
      while (gap < batch.gaps.size() && batch.gaps[gap].row <= first + pos) {
        matcher.note_loss(batch.gaps[gap++].records);
      }
      const PairTable& p = tables[rows[pos] >> 32];
      const auto i = static_cast<uint32_t>(rows[pos]);
      if (p.key == nullptr) continue;
      if (p.event != nullptr) {
        const uint16_t id = p.event[i];  // defensive: ids outside the rule are not matched
        if (id >= rule.role.size() || rule.role[id] == 0) continue;
      }
      const IntervalMatch& m =
          p.key_bits != nullptr
              ? matcher.match(0, p.begin, p.key_bits[i], p.time_ns[i], p.thread[i])
              : matcher.match(0, p.begin, p.key->string_at(i), p.time_ns[i], p.thread[i]);
      if (m.kind == IntervalMatch::Kind::kBegin) {
        uint32_t g = 0;
        if (p.by != nullptr) {
          // The call site's own field: its enum names, as display_value() shows them.
          const uint16_t id = p.event != nullptr ? p.event[i] : p.table->ids[0];
          const FieldInfo& f = trace.event_by_id(id)->fields[static_cast<size_t>(d.by_field[id])];
          const FieldValue v = p.by->value_at(i);
          g = d.group_of(f.value_names.empty() ? v : named_value(f, v));
        }
        d.began(m, g, 0);
      } else if (m.kind == IntervalMatch::Kind::kEnd) {
        d.ended(m, [&] { return p.key->value_at(i); });
      }
    }
    for (; gap < batch.gaps.size(); ++gap) matcher.note_loss(batch.gaps[gap].records);
    first += batch.rows;
  }
  for (const ThreadStats& t : batch.threads) d.records += t.records;
  return batch.threads;
}

std::span<const uint64_t> PairMatcher::latencies() const {
  impl_->widen();
  return {impl_->all64.data(), impl_->all64.size()};
}

LatencyReport PairMatcher::finish(uint64_t lost_total) {
  Impl& d = *impl_;
  LatencyReport rep;
  rep.rule = d.intervals->rules()[0].rule;
  rep.by = d.by;
  rep.records = d.records;
  for (const auto& [rule, open] : d.intervals->finish(lost_total)) {
    ++d.groups[group_of_tag(open.tag)].unmatched_begins;
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
  rep.overall = d.wide ? stats_of(std::span<uint64_t>(d.all64.data(), d.all64.size()))
                       : stats_of(std::span<uint32_t>(d.narrow.data(), d.narrow.size()));
  rep.overall.unmatched_begins = unmatched_begins;
  while (!d.slowest.empty()) {
    const Slow& s = d.slowest.top();
    SlowPair p;
    p.latency_ns = s.latency_ns;
    p.begin_ns = s.begin_ns;
    p.begin_realtime_ns = d.trace->time_origin().realtime_ns + s.begin_ns;
    if (s.thread < d.thread_names.size()) {
      p.tid = d.thread_names[s.thread].first;
      p.pid = d.thread_pids[s.thread];
      p.thread = d.thread_names[s.thread].second;
    }
    if (s.task != 0) {
      // A kernel begin record: the task it ran in, named when it is a traced thread (the
      // CPU's name stays otherwise).
      p.tid = s.task;
      p.pid = 0;
      for (size_t t = 0; t < d.thread_names.size(); ++t) {
        if (d.thread_names[t].first != s.task || d.thread_pids[t] == 0) continue;
        p.pid = d.thread_pids[t];
        p.thread = d.thread_names[t].second;
        break;
      }
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
  const std::vector<ThreadStats> threads = (*matcher)->add_all(trace);
  // Every loss, as `stats` counts them: the threads' and the processes' (no slot, reclaimed).
  uint64_t lost = lost_outside_threads(trace), kernel_lost = 0, corrupt_blocks = 0;
  for (const ThreadStats& t : threads) {
    (t.info.kernel ? kernel_lost : lost) += t.lost();
    corrupt_blocks += t.corrupt_blocks;
  }
  LatencyReport rep = (*matcher)->finish(lost + kernel_lost);
  rep.lost = lost;
  rep.kernel_lost = kernel_lost;
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

}  // namespace nanotrace
