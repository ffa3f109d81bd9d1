// What the recording loop applies to each process it records: a trigger expression bound to
// the process's events (--stop-on, --snapshot-on), and the groups it enables while recording
// (--groups), restored afterwards. Internal header.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/group_spec.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/trigger.hpp"
#include "record/drainer.hpp"
#include "record/duration_watch.hpp"

namespace nanotrace::rec {

// A trigger expression bound lazily to each event id as records of it appear; a duration
// trigger pairs the records with a DurationWatch.
class BoundTrigger {
 public:
  Status init(const std::string& text, const Trace& trace) {
    auto t = Trigger::parse(text);
    if (!t.ok()) return t.status();
    if (t->duration) {
      duration_ = std::make_unique<DurationWatch>();
      return duration_->init(*t, trace);
    }
    trigger_ = std::move(t.value());
    bool known = false;
    for (const EventInfo& e : trace.events()) {
      if (e.group != trigger_->group || e.name != trigger_->event) continue;
      known = true;
      auto b = bind(e);
      if (!b.ok()) return b.status();
    }
    (void)known;  // an event not declared yet may appear later
    return Status::Ok();
  }
  bool active() const { return trigger_.has_value() || (duration_ && duration_->active()); }
  // A duration trigger (its match described by duration()->describe()), or null.
  DurationWatch* duration() const { return duration_.get(); }

  bool matches(const Record& r, const StreamState& st) {
    if (duration_) return duration_->on_record(r, st);
    if (!trigger_ || r.event->group != trigger_->group || r.event->name != trigger_->event) {
      return false;
    }
    if (bound_.size() <= r.event->id) bound_.resize(r.event->id + 1);
    auto& b = bound_[r.event->id];
    if (!b) {
      auto res = bind(*r.event);
      if (!res.ok()) return false;
      b = std::move(res.value());
    }
    return trigger_->matches(*b, r.values);
  }

 private:
  Result<std::vector<uint32_t>> bind(const EventInfo& e) {
    std::vector<std::string> names;
    std::vector<abi::FieldType> types;
    for (const FieldInfo& f : e.fields) {
      names.push_back(f.name);
      types.push_back(f.type);
    }
    return trigger_->bind(names, types);
  }

  std::optional<Trigger> trigger_;
  std::vector<std::optional<std::vector<uint32_t>>> bound_;
  std::unique_ptr<DurationWatch> duration_;
};

// The record that matched --stop-on, as the summary names it: the record, its thread, the
// process when several are recorded, and its time.
inline std::string describe_stop_match(const Record& r, const StreamState& st, const Trace& t,
                                       bool name_process) {
  return "record " + std::to_string(r.seq) + " (" + r.event->full_name() + " " + format_fields(r) +
         ") of thread " + std::to_string(st.tid) + " (" + st.name + ", slot " +
         std::to_string(st.slot) + ")" +
         (name_process ? " of process " + std::to_string(t.process().pid) : "") + " at " +
         std::to_string(static_cast<double>(t.ticks_to_ns(r.ticks)) / 1e9) + " s";
}

// Enables exactly the groups `wanted` selects (items of the group grammar: `all,-debug`);
// remembers the previous state to restore it. REQUIRES: wanted checked with
// validate_group_spec against the groups of the processes it is meant for (a name this
// process lacks selects nothing in it).
class GroupGuard {
 public:
  Status apply(Trace& trace, const std::vector<std::string>& wanted) {
    std::vector<GroupInfo> before = trace.groups();
    std::string spec;
    for (const std::string& w : wanted) spec += (spec.empty() ? "" : ",") + w;
    trace_ = &trace;
    before_ = before;
    for (const GroupInfo& g : before) {
      const bool on = group_spec_enables(spec, g.name);
      if (on != g.enabled) {
        Status s = trace.set_group_enabled(g.name, on);
        if (!s.ok()) return s;
      }
    }
    return Status::Ok();
  }
  ~GroupGuard() {
    if (!trace_) return;
    for (const GroupInfo& g : before_) (void)trace_->set_group_enabled(g.name, g.enabled);
  }

 private:
  Trace* trace_ = nullptr;
  std::vector<GroupInfo> before_;
};

}  // namespace nanotrace::rec
