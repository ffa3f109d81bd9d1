// Trace.stats(), Trace.latency() and Trace.pairs() of the Python module: the analysis layer's
// results as dicts (the keys of `nanotrace stats --json` and `nanotrace latency --json`) and
// the interval matcher's outcomes as numpy columns.
#include "python/py_analysis.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>

#include "nanotrace/analysis.hpp"
#include "nanotrace/diff.hpp"
#include "nanotrace/intervals.hpp"
#include "python/py_categories.hpp"
#include "python/py_columns.hpp"
#include "python/py_common.hpp"

namespace nanotrace::python {
namespace {

py::dict latency_stats(const LatencyStats& s) {
  py::list histogram;
  for (const HistogramBucket& b : s.histogram) {
    py::dict h;
    h["lo_ns"] = b.lo_ns;
    h["hi_ns"] = b.hi_ns;
    h["count"] = b.count;
    histogram.append(h);
  }
  py::dict d;
  d["count"] = s.count;
  d["unmatched_begins"] = s.unmatched_begins;
  d["min_ns"] = s.min_ns;
  d["p50_ns"] = s.p50_ns;
  d["p90_ns"] = s.p90_ns;
  d["p99_ns"] = s.p99_ns;
  d["p999_ns"] = s.p999_ns;
  d["max_ns"] = s.max_ns;
  d["mean_ns"] = s.mean_ns;
  d["histogram"] = histogram;
  return d;
}

// A value of the rule's records kept for a column: its bits, or its text.
struct Kept {
  uint64_t bits = 0;
  std::string text;
};

// A field of the rule's records as a column: typed like the field when every event of the
// rule has it with one type (and the same enum names), else as its text (format_value).
struct ValueColumn {
  FieldColumn column;
  std::shared_ptr<StringDictionary> strings;  // column.dictionary
  bool as_text = false;

  // field_of(id): the field's index in event id's record.
  void init(const Trace& trace, const std::vector<uint16_t>& ids,
            const std::vector<int>& field_of) {
    const FieldInfo* first = nullptr;
    for (uint16_t id : ids) {
      const FieldInfo& f = trace.event_by_id(id)->fields[static_cast<size_t>(field_of[id])];
      if (first == nullptr) {
        first = &f;
        continue;
      }
      bool same = f.type == first->type && f.value_names.size() == first->value_names.size();
      for (size_t i = 0; same && i < f.value_names.size(); ++i) {
        same = f.value_names[i].value == first->value_names[i].value &&
               f.value_names[i].name == first->value_names[i].name;
      }
      as_text = as_text || !same;
    }
    column.info = *first;
    if (as_text) {
      column.info.type = abi::FieldType::kString;
      column.info.value_names.clear();
    }
    if (column.is_string()) column.dictionary = strings = std::make_shared<StringDictionary>();
  }
  Kept keep(const FieldInfo& f, const FieldValue& v) const {
    if (as_text) return {0, format_value(named_value(f, v))};
    if (v.type == abi::FieldType::kString) return {0, std::string(v.text)};
    return {v.bits, {}};
  }
  void put(const Kept& v) {
    if (column.is_string()) {
      column.codes.push_back(strings->code_of(v.text));
    } else {
      column.bits.push_back(v.bits);
    }
  }
};

// The outcomes of one rule, as columns.
struct PairColumns {
  std::vector<uint64_t> begin_ns, end_ns, latency_ns;
  std::vector<uint32_t> begin_tid, end_tid;
  ColumnArray<uint8_t> kind;
  std::vector<uint8_t> lost_adjacent;
  ValueColumn key, by;
  bool with_by = false;

  void add(uint8_t k, const Interval& i, uint32_t begin_tid_, uint32_t end_tid_, bool lost,
           const Kept& key_, const Kept& by_) {
    begin_ns.push_back(i.begin_ns);
    end_ns.push_back(i.end_ns);
    latency_ns.push_back(k == 0 ? i.latency_ns() : 0);
    begin_tid.push_back(begin_tid_);
    end_tid.push_back(end_tid_);
    kind.push_back(k);
    lost_adjacent.push_back(lost);
    key.put(key_);
    if (with_by) by.put(by_);
  }
};

// The key and by value of an open interval, in slots reused once it closes.
struct Opened {
  Kept key, by;
};

}  // namespace

py::dict trace_stats(Trace& trace) {
  TraceStats st;
  {
    py::gil_scoped_release unlocked;
    st = analyze_stats(trace);
  }
  const ProcessInfo& p = trace.process();
  py::list events, threads;
  for (const EventCount& e : st.events) {
    py::dict d;
    d["event"] = text(e.event);
    d["count"] = e.rate.count;
    d["rate_per_s"] = e.rate.per_second();
    events.append(d);
  }
  uint64_t corrupt = 0, unreadable = 0;
  for (size_t i = 0; i < st.threads.size(); ++i) {
    const ThreadStats& s = st.threads[i];
    corrupt += s.corrupt_blocks;
    unreadable += s.unreadable;
    py::dict d;
    d["pid"] = s.info.pid;
    if (!trace.nodes().empty() && s.info.process < trace.processes().size()) {
      d["node"] = text(trace.nodes()[trace.processes()[s.info.process].node].hostname);
    }
    d["process"] = s.info.process < trace.processes().size()
                       ? text(trace.processes()[s.info.process].process_name)
                       : py::str("");
    d["tid"] = s.info.tid;
    d["name"] = text(s.info.name);
    d["state"] = s.info.state == abi::SlotState::kExited ? "exited" : "active";
    d["records"] = s.records;
    d["written"] = s.info.written;
    d["rate_per_s"] = st.thread_rates[i].per_second();
    d["lost"] = s.lost();
    d["overwritten"] = s.overwritten;
    d["dropped"] = s.dropped;
    d["corrupt_blocks"] = s.corrupt_blocks;
    d["unreadable"] = s.unreadable;
    threads.append(d);
  }
  py::dict out;
  out["pid"] = p.pid;
  out["alive"] = p.alive;
  out["mode"] = mode_name(p.mode);
  out["records"] = st.total.count;
  out["span_s"] = st.span_s();
  out["rate_per_s"] = st.total.per_second();
  out["lost"] = st.lost;
  out["lost_no_slot"] = st.lost_no_slot;
  out["lost_reclaimed"] = st.lost_reclaimed;
  out["corrupt_blocks"] = corrupt;
  out["unreadable"] = unreadable;
  out["processes"] = trace.processes().size();
  out["events"] = events;
  out["threads"] = threads;
  return out;
}

py::dict trace_latency(Trace& trace, const std::string& begin, const std::string& end,
                       const std::string& key, const std::string& by, uint32_t top) {
  LatencyOptions options;
  options.rule = PairRule{begin, end, key};
  options.by = by;
  options.top = top;
  Result<LatencyReport> result = [&] {
    py::gil_scoped_release unlocked;
    return analyze_latency(trace, options);
  }();
  const LatencyReport rep = take(std::move(result));
  py::dict j;
  j["begin"] = text(rep.rule.begin);
  j["end"] = text(rep.rule.end);
  j["key"] = text(rep.rule.key);
  j["by"] = text(rep.by);
  j["records"] = rep.records;
  j["begins"] = rep.begins;
  j["ends"] = rep.ends;
  j["unmatched_ends"] = rep.unmatched_ends;
  j["lost"] = rep.lost;
  j["kernel_lost"] = rep.kernel_lost;
  j["corrupt_blocks"] = rep.corrupt_blocks;
  j["lost_adjacent_pairs"] = rep.lost_adjacent_pairs;
  j["lost_adjacent_unmatched"] = rep.lost_adjacent_unmatched;
  j["overall"] = latency_stats(rep.overall);
  py::list groups, slowest;
  for (const LatencyStats& g : rep.groups) {
    py::dict d = latency_stats(g);
    d["value"] = text(g.by_value);
    groups.append(d);
  }
  for (const SlowPair& p : rep.top) {
    py::dict d;
    d["latency_ns"] = p.latency_ns;
    d["begin_ns"] = p.begin_ns;
    d["begin_realtime_ns"] = p.begin_realtime_ns;
    d["pid"] = p.pid;
    d["tid"] = p.tid;
    d["thread"] = text(p.thread);
    d["key"] = text(p.key);
    d["by"] = text(p.by_value);
    slowest.append(d);
  }
  j["groups"] = groups;
  j["top"] = slowest;
  return j;
}

namespace {

// For each begin event of the rule, the index of its field named `by` (-1 elsewhere); an
// error if a begin event has no such field.
std::vector<int> by_fields(Trace& trace, const ResolvedPair& rule, const std::string& by) {
  std::vector<int> by_field(rule.role.size(), -1);
  if (by.empty()) return by_field;
  for (uint16_t id : rule.begin_ids) {
    const EventInfo* e = trace.event_by_id(id);
    for (size_t f = 0; f < e->fields.size(); ++f) {
      if (e->fields[f].name == by) by_field[id] = static_cast<int>(f);
    }
    if (by_field[id] < 0) {
      check(Status::NotFound("by: begin event " + e->full_name() + " has no field '" + by + "'"));
    }
  }
  return by_field;
}

// The matcher's intervals as rows of PairColumns. An open begin's key (and by value) waits in
// a slot, named by the interval's tag, until its end or the end of the trace; a slot is reused
// once its interval is written.
class PairCollector {
 public:
  PairCollector(Trace& trace, const ResolvedPair& rule, std::vector<int> by_field, bool with_by,
                const std::vector<ThreadStats>& threads)
      : by_field_(std::move(by_field)), threads_(threads) {
    std::vector<uint16_t> ids = rule.begin_ids;
    ids.insert(ids.end(), rule.end_ids.begin(), rule.end_ids.end());
    out_.key.init(trace, ids, rule.key_field);
    out_.with_by = with_by;
    if (out_.with_by) out_.by.init(trace, rule.begin_ids, by_field_);
  }

  // r, which the matcher (whose rule is `rule`) matched as m.
  void add(const Record& r, const IntervalMatch& m, const ResolvedPair& rule) {
    const uint16_t id = r.event->id;
    const auto k = static_cast<uint32_t>(rule.key_field[id]);
    if (m.kind == IntervalMatch::Kind::kBegin) {
      if (m.replaced) unmatched_begin(m.interval);
      Opened o{out_.key.keep(r.event->fields[k], r.values[k]), {}};
      if (by_field_[id] >= 0) {
        auto f = static_cast<uint32_t>(by_field_[id]);
        o.by = out_.by.keep(r.event->fields[f], r.values[f]);
      }
      *m.tag = open(std::move(o));
    } else if (m.kind == IntervalMatch::Kind::kEnd) {
      Opened o = release(m.interval.tag);
      out_.add(0, m.interval, tid(m.interval.begin_thread), tid(m.interval.end_thread),
               m.interval.lost_adjacent, o.key, o.by);
    } else {
      Interval i;
      i.end_ns = r.time_ns;
      out_.add(2, i, 0, tid(r.thread), m.lost_adjacent,
               out_.key.keep(r.event->fields[k], r.values[k]), Kept{});
    }
  }

  // A begin whose end never came (replaced, or open at the end of the trace).
  void unmatched_begin(const Interval& i) {
    Opened o = release(i.tag);
    out_.add(1, i, tid(i.begin_thread), 0, i.lost_adjacent, o.key, o.by);
  }

  PairColumns& columns() { return out_; }

 private:
  uint32_t tid(uint32_t thread) const {
    return thread < threads_.size() ? threads_[thread].info.tid : 0;
  }
  uint64_t open(Opened o) {
    if (free_slots_.empty()) {
      opened_.push_back(std::move(o));
      return opened_.size() - 1;
    }
    const uint64_t slot = free_slots_.back();
    free_slots_.pop_back();
    opened_[slot] = std::move(o);
    return slot;
  }
  Opened release(uint64_t slot) {
    Opened o = std::move(opened_[slot]);
    free_slots_.push_back(slot);
    return o;
  }

  const std::vector<int> by_field_;
  const std::vector<ThreadStats>& threads_;
  PairColumns out_;
  std::vector<Opened> opened_;
  std::vector<uint64_t> free_slots_;
};

py::dict pair_columns_to_python(const PairColumns& out) {
  const auto n = static_cast<py::ssize_t>(out.kind.size());
  py::array_t<bool> lost_adjacent(n);
  for (py::ssize_t i = 0; i < n; ++i) lost_adjacent.mutable_data()[i] = out.lost_adjacent[i] != 0;
  py::dict columns;
  columns["kind"] = fixed_categorical({"pair", "unmatched_begin", "unmatched_end"}, out.kind);
  columns["begin_ns"] = py::array_t<uint64_t>(n, out.begin_ns.data());
  columns["end_ns"] = py::array_t<uint64_t>(n, out.end_ns.data());
  columns["latency_ns"] = py::array_t<uint64_t>(n, out.latency_ns.data());
  columns["begin_tid"] = py::array_t<uint32_t>(n, out.begin_tid.data());
  columns["end_tid"] = py::array_t<uint32_t>(n, out.end_tid.data());
  columns["key"] = column_object(out.key.column, out.kind.size());
  if (out.with_by) columns["by"] = column_object(out.by.column, out.kind.size());
  columns["lost_adjacent"] = lost_adjacent;
  return columns;
}

}  // namespace

py::dict trace_pairs(Trace& trace, const std::string& begin, const std::string& end,
                     const std::string& key, const std::string& by) {
  ResolvedPair rule = take(resolve_pair(trace, PairRule{begin, end, key}));
  std::vector<int> by_field = by_fields(trace, rule, by);
  IntervalMatcher matcher({rule});
  auto source = trace.read_all();
  PairCollector pairs(trace, rule, std::move(by_field), !by.empty(), source->threads());
  Record r;
  while (source->next(&r)) {
    const std::vector<IntervalMatch>& matches = matcher.add(r);
    if (!matches.empty()) pairs.add(r, matches.front(), matcher.rules()[0]);
  }
  uint64_t lost = lost_outside_threads(trace);
  for (const ThreadStats& s : source->threads()) lost += s.lost();
  for (const auto& [unused, i] : matcher.finish(lost)) pairs.unmatched_begin(i);
  // Losses the stream cannot place make every unmatched record lost-adjacent.
  PairColumns& out = pairs.columns();
  if (lost > matcher.lost_seen()) {
    for (size_t i = 0; i < out.kind.size(); ++i) out.lost_adjacent[i] |= out.kind[i] != 0;
  }
  return pair_columns_to_python(out);
}

std::string runs_diff_json(const std::vector<std::string>& a, const std::vector<std::string>& b,
                           const std::vector<std::string>& pairs, double alpha, double min_change,
                           uint32_t resamples, uint64_t seed) {
  DiffOptions options;
  for (const std::string& p : pairs) options.pairs.push_back(take(parse_pair_rule(p)));
  if (!(alpha > 0 && alpha < 1)) check(Status::Invalid("alpha must be between 0 and 1"));
  if (!(min_change >= 0)) check(Status::Invalid("min_change must be at least 0 (percent)"));
  if (resamples < 100) check(Status::Invalid("resamples must be at least 100"));
  options.alpha = alpha;
  options.min_change_percent = min_change;
  options.resamples = resamples;
  options.seed = seed;
  Result<DiffReport> report = [&] {
    py::gil_scoped_release unlocked;
    return diff_runs(a, b, options);
  }();
  return diff_json(take(std::move(report)));
}

}  // namespace nanotrace::python
