// A live frame as JSON (docs/reference/top.md, "JSON") and back. Strings from the traced
// processes are made valid UTF-8 first. The parser checks every member's type and never
// throws: a frame comes from another node over the fleet.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/utf8.hpp"
#include "live/live_view.hpp"

namespace nanotrace::live {
namespace {

using nlohmann::json;

constexpr int kFormatVersion = 1;

json summary_json(const LatencySummary& s) {
  return {{"count", s.count}, {"p50_ns", s.p50_ns}, {"p99_ns", s.p99_ns}, {"max_ns", s.max_ns}};
}

json rule_json(const PairRule& r) {
  return {
      {"begin", utf8::valid(r.begin)}, {"end", utf8::valid(r.end)}, {"key", utf8::valid(r.key)}};
}

json process_json(const LiveProcess& p) {
  return {{"pid", p.pid},
          {"name", utf8::valid(p.name)},
          {"alive", p.alive},
          {"threads", p.threads},
          {"records", p.records},
          {"records_per_second", p.records_per_second},
          {"ring_dropped", p.ring_dropped},
          {"lost_no_slot", p.lost_no_slot},
          {"lost_reclaimed", p.lost_reclaimed},
          {"missed", p.missed},
          {"missed_interval", p.missed_interval},
          {"corrupt_blocks", p.corrupt_blocks},
          {"slots_reused_unread", p.slots_reused_unread},
          {"open_dropped", p.open_dropped}};
}

json pair_json(const LivePair& p) {
  return {{"rule", rule_json(p.rule)},          {"inferred", p.inferred},
          {"processes", p.processes},           {"last", summary_json(p.last)},
          {"total", summary_json(p.total)},     {"open", p.open},
          {"oldest_open_ns", p.oldest_open_ns}, {"replaced", p.replaced},
          {"unmatched_ends", p.unmatched_ends}};
}

json waiter_json(const LiveWaiter& w) {
  return {{"pid", w.pid},
          {"process", utf8::valid(w.process)},
          {"rule", rule_json(w.rule)},
          {"key", utf8::valid(w.key)},
          {"tid", w.tid},
          {"thread", utf8::valid(w.thread)},
          {"age_ns", w.age_ns},
          {"begin_realtime_ns", w.begin_realtime_ns},
          {"fields", utf8::valid(w.fields)},
          {"end_may_be_lost", w.end_may_be_lost}};
}

// Typed reads of an object's members: false (and a message naming the member) when one is
// missing or of another type.
class Reader {
 public:
  explicit Reader(std::string* error) : error_(error) {}

  template <class T>
  bool get(const json& o, const char* name, T* out) {
    if (!o.is_object()) return fail(std::string("expected an object holding '") + name + "'");
    auto it = o.find(name);
    if (it == o.end()) return fail(std::string("missing '") + name + "'");
    if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) return fail(std::string("'") + name + "' is not a boolean");
      *out = it->template get<bool>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) return fail(std::string("'") + name + "' is not a string");
      *out = it->template get<std::string>();
    } else if constexpr (std::is_same_v<T, double>) {
      if (!it->is_number()) return fail(std::string("'") + name + "' is not a number");
      *out = it->template get<double>();
    } else {
      if (!it->is_number_unsigned() ||
          it->template get<uint64_t>() > std::numeric_limits<T>::max()) {
        return fail(std::string("'") + name + "' is not a count");
      }
      *out = static_cast<T>(it->template get<uint64_t>());
    }
    return true;
  }
  const json* array(const json& o, const char* name) {
    if (!o.is_object() || !o.contains(name) || !o[name].is_array()) {
      fail(std::string("'") + name + "' is not an array");
      return nullptr;
    }
    return &o[name];
  }
  bool fail(std::string m) {
    if (error_->empty()) *error_ = std::move(m);
    return false;
  }

 private:
  std::string* error_;
};

bool read_summary(Reader& r, const json& o, const char* name, LatencySummary* s) {
  if (!o.is_object() || !o.contains(name)) return r.fail(std::string("missing '") + name + "'");
  const json& j = o[name];
  return r.get(j, "count", &s->count) && r.get(j, "p50_ns", &s->p50_ns) &&
         r.get(j, "p99_ns", &s->p99_ns) && r.get(j, "max_ns", &s->max_ns);
}

bool read_rule(Reader& r, const json& o, PairRule* rule) {
  if (!o.is_object() || !o.contains("rule")) return r.fail("missing 'rule'");
  const json& j = o["rule"];
  return r.get(j, "begin", &rule->begin) && r.get(j, "end", &rule->end) &&
         r.get(j, "key", &rule->key);
}

bool read_process(Reader& r, const json& j, LiveProcess* p) {
  return r.get(j, "pid", &p->pid) && r.get(j, "name", &p->name) && r.get(j, "alive", &p->alive) &&
         r.get(j, "threads", &p->threads) && r.get(j, "records", &p->records) &&
         r.get(j, "records_per_second", &p->records_per_second) &&
         r.get(j, "ring_dropped", &p->ring_dropped) && r.get(j, "lost_no_slot", &p->lost_no_slot) &&
         r.get(j, "lost_reclaimed", &p->lost_reclaimed) && r.get(j, "missed", &p->missed) &&
         r.get(j, "missed_interval", &p->missed_interval) &&
         r.get(j, "corrupt_blocks", &p->corrupt_blocks) &&
         r.get(j, "slots_reused_unread", &p->slots_reused_unread) &&
         r.get(j, "open_dropped", &p->open_dropped);
}

bool read_event(Reader& r, const json& j, LiveEvent* e) {
  return r.get(j, "event", &e->event) && r.get(j, "count", &e->count) &&
         r.get(j, "per_second", &e->per_second) && r.get(j, "total", &e->total) &&
         r.get(j, "processes", &e->processes);
}

bool read_pair(Reader& r, const json& j, LivePair* p) {
  return read_rule(r, j, &p->rule) && r.get(j, "inferred", &p->inferred) &&
         r.get(j, "processes", &p->processes) && read_summary(r, j, "last", &p->last) &&
         read_summary(r, j, "total", &p->total) && r.get(j, "open", &p->open) &&
         r.get(j, "oldest_open_ns", &p->oldest_open_ns) && r.get(j, "replaced", &p->replaced) &&
         r.get(j, "unmatched_ends", &p->unmatched_ends);
}

bool read_waiter(Reader& r, const json& j, LiveWaiter* w) {
  return r.get(j, "pid", &w->pid) && r.get(j, "process", &w->process) &&
         read_rule(r, j, &w->rule) && r.get(j, "key", &w->key) && r.get(j, "tid", &w->tid) &&
         r.get(j, "thread", &w->thread) && r.get(j, "age_ns", &w->age_ns) &&
         r.get(j, "begin_realtime_ns", &w->begin_realtime_ns) && r.get(j, "fields", &w->fields) &&
         r.get(j, "end_may_be_lost", &w->end_may_be_lost);
}

template <class T, class Read>
bool read_list(Reader& r, const json& o, const char* name, Read read, std::vector<T>* out) {
  const json* a = r.array(o, name);
  if (a == nullptr) return false;
  for (const json& item : *a) {
    T value;
    if (!read(r, item, &value)) return false;
    out->push_back(std::move(value));
  }
  return true;
}

}  // namespace

json frame_json_value(const LiveFrame& f) {
  json processes = json::array(), events = json::array(), pairs = json::array(),
       waiters = json::array(), notes = json::array();
  for (const LiveProcess& p : f.processes) processes.push_back(process_json(p));
  for (const LiveEvent& e : f.events) {
    events.push_back({{"event", utf8::valid(e.event)},
                      {"count", e.count},
                      {"per_second", e.per_second},
                      {"total", e.total},
                      {"processes", e.processes}});
  }
  for (const LivePair& p : f.pairs) pairs.push_back(pair_json(p));
  for (const LiveWaiter& w : f.waiters) waiters.push_back(waiter_json(w));
  for (const std::string& n : f.notes) notes.push_back(utf8::valid(n));
  return {{"version", kFormatVersion},
          {"sequence", f.sequence},
          {"realtime_ns", f.realtime_ns},
          {"interval_s", f.interval_s},
          {"processes", processes},
          {"events", events},
          {"pairs", pairs},
          {"waiters", waiters},
          {"open_total", f.open_total},
          {"notes", notes}};
}

std::string frame_json(const LiveFrame& f) {
  return frame_json_value(f).dump(2, ' ', false, json::error_handler_t::replace);
}

Result<LiveFrame> parse_frame_json(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Corrupt("top frame: not JSON");
  return parse_frame_json_value(j);
}

Result<LiveFrame> parse_frame_json_value(const json& j) {
  if (!j.is_object()) return Status::Corrupt("top frame: not a JSON object");
  std::string error;
  Reader r(&error);
  LiveFrame f;
  int version = 0;
  bool ok = r.get(j, "version", &version);
  if (ok && version != kFormatVersion) {
    return Status::Unsupported(
        fmt::format("top frame: version {} (this build reads {})", version, kFormatVersion));
  }
  ok = ok && r.get(j, "sequence", &f.sequence) && r.get(j, "realtime_ns", &f.realtime_ns) &&
       r.get(j, "interval_s", &f.interval_s) &&
       read_list(r, j, "processes", read_process, &f.processes) &&
       read_list(r, j, "events", read_event, &f.events) &&
       read_list(r, j, "pairs", read_pair, &f.pairs) &&
       read_list(r, j, "waiters", read_waiter, &f.waiters) && r.get(j, "open_total", &f.open_total);
  const json* notes = ok ? r.array(j, "notes") : nullptr;
  if (notes != nullptr) {
    for (const json& n : *notes) {
      if (!n.is_string()) return Status::Corrupt("top frame: a note is not a string");
      f.notes.push_back(n.get<std::string>());
    }
  }
  if (!ok || notes == nullptr) return Status::Corrupt("top frame: " + error);
  return f;
}

std::string human_duration(uint64_t ns) {
  if (ns < 1000) return fmt::format("{}ns", ns);
  if (ns < 1000000) return fmt::format("{:.1f}us", ns / 1e3);
  if (ns < 1000000000) return fmt::format("{:.1f}ms", ns / 1e6);
  return fmt::format("{:.2f}s", ns / 1e9);
}

}  // namespace nanotrace::live
