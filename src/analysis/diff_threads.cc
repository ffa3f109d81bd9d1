// The threads of a diff: on-CPU and off-CPU time of each traced thread, from the scheduler's
// sched_switch events of a trace recorded with --kernel sched. A thread's on-CPU samples are
// its slices (switched in to switched out), its off-CPU samples the gaps between them
// (switched out to switched in: waiting for I/O, a lock, a timer, or a CPU). Threads are
// matched between runs by name (their ids differ from run to run); threads of one name are
// pooled.
#include <fmt/format.h>

#include <map>
#include <unordered_map>

#include "analysis/diff_subjects.hpp"

namespace nanotrace::diff {
namespace {

struct ThreadTimes {
  std::vector<uint64_t> on, off;
};

// Field index by name in an event, -1 if absent.
int field_index(const EventInfo& e, const char* name) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// Slices of the traced threads of one run, by thread name; false without sched_switch.
bool switches(Trace& trace, std::map<std::string, ThreadTimes>* out) {
  std::vector<uint8_t> is_switch(trace.kernel_events().size(), 0);
  int prev = -1, next = -1;
  bool any = false;
  for (const EventInfo& e : trace.kernel_events()) {
    if (e.full_name() != "sched:sched_switch") continue;
    const int p = field_index(e, "prev_pid"), n = field_index(e, "next_pid");
    if (p < 0 || n < 0 || (prev >= 0 && (p != prev || n != next))) continue;
    prev = p;
    next = n;
    is_switch[e.id] = 1;
    any = true;
  }
  if (!any) return false;
  // The traced threads: those with a ring (the kernel's pid filter also keeps the other side
  // of their switches: idle, other processes).
  std::unordered_map<uint64_t, std::string> names;
  struct State {
    uint64_t in_ns = 0, out_ns = 0;
    bool in = false, out = false;
  };
  std::unordered_map<uint64_t, State> state;
  auto records = trace.read_all_with_kernel();
  Record r;
  while (records->next(&r)) {
    if (!r.event->is_kernel || !is_switch[r.event->id]) continue;
    if (names.empty()) {
      for (const ThreadStats& t : records->threads()) {
        if (!t.info.kernel && t.info.tid != 0) names[t.info.tid] = t.info.name;
      }
    }
    const uint64_t from = r.values[prev].bits, to = r.values[next].bits;
    if (auto it = names.find(from); it != names.end()) {
      State& s = state[from];
      if (s.in && r.time_ns >= s.in_ns) (*out)[it->second].on.push_back(r.time_ns - s.in_ns);
      s.in = false;
      s.out = true;
      s.out_ns = r.time_ns;
    }
    if (auto it = names.find(to); it != names.end()) {
      State& s = state[to];
      if (s.out && r.time_ns >= s.out_ns) (*out)[it->second].off.push_back(r.time_ns - s.out_ns);
      s.out = false;
      s.in = true;
      s.in_ns = r.time_ns;
    }
  }
  return true;
}

}  // namespace

void thread_samples(const std::vector<Trace*>& a, const std::vector<Trace*>& b,
                    std::vector<SubjectSamples>* subjects, std::vector<std::string>* notes) {
  size_t with = 0;
  for (const auto* side : {&a, &b}) {
    for (Trace* t : *side) {
      for (const EventInfo& e : t->kernel_events()) {
        if (e.full_name() == "sched:sched_switch") {
          ++with;
          break;
        }
      }
    }
  }
  if (with == 0) return;
  if (with < a.size() + b.size()) {
    notes->push_back("threads not compared: not every run holds sched:sched_switch events");
    return;
  }
  // Per run, then per name: a name must be in every run of both sides.
  std::vector<std::map<std::string, ThreadTimes>> runs_a(a.size()), runs_b(b.size());
  for (size_t i = 0; i < a.size(); ++i) switches(*a[i], &runs_a[i]);
  for (size_t i = 0; i < b.size(); ++i) switches(*b[i], &runs_b[i]);
  std::map<std::string, size_t> present;
  for (const auto* runs : {&runs_a, &runs_b}) {
    for (const auto& run : *runs) {
      for (const auto& [name, times] : run) ++present[name];
    }
  }
  for (const auto& [name, n] : present) {
    if (n != a.size() + b.size()) {
      notes->push_back(fmt::format("thread {} is not in every run: not compared", name));
      continue;
    }
    for (const bool on : {true, false}) {
      SubjectSamples s;
      s.kind = "thread";
      s.name = fmt::format("{} {}", name, on ? "on-CPU" : "off-CPU");
      for (const auto& run : runs_a) s.a.add_run(on ? run.at(name).on : run.at(name).off);
      for (const auto& run : runs_b) s.b.add_run(on ? run.at(name).on : run.at(name).off);
      if (s.a.count() == 0 || s.b.count() == 0) continue;
      subjects->push_back(std::move(s));
    }
  }
}

}  // namespace nanotrace::diff
