// The threads of a diff: on-CPU and off-CPU time of each traced thread, from the scheduler's
// sched_switch events of a trace recorded with --kernel sched. A thread's on-CPU samples are
// its slices (switched in to switched out), its off-CPU samples the gaps between them in which
// it was blocked (switched out asleep: waiting for I/O, a lock, a timer, up to its wake-up),
// and its samples of waiting for a CPU the gaps after it was switched out runnable (preempted)
// or woken. Where the kernel did not log the switch in, the gap ends at the thread's first
// record after it; where it did not log the wake-up, the blocked gap runs to the switch in. Threads
// are matched between runs by name (their ids differ from run to run); threads of one name are
// pooled.
//
// Blocked and preempted gaps were one subject before: on a loaded machine the preemptions
// outnumbered a thread's sleeps and took its off-CPU median with them (a 2 ms longer sleep
// per request showed as 0.24 ms less off-CPU time). So were a sleep and the wait for a CPU
// after its wake-up: on a loaded machine one run's wake-ups waited 2.6 ms longer than the
// other's, and a sleep 2 ms longer showed as 0.6 ms less off-CPU time.
#include <fmt/format.h>

#include <map>
#include <unordered_map>

#include "analysis/diff_subjects.hpp"

namespace nanotrace::diff {
namespace {

struct ThreadTimes {
  std::vector<uint64_t> on, off, runnable;
};

// Field index by name in an event, -1 if absent.
int field_index(const EventInfo& e, const char* name) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// Which sched_switch fields name the two threads, and which kernel events are switches.
struct SwitchEvents {
  std::vector<uint8_t> is_switch;  // by kernel event id
  int prev = -1, next = -1;        // field indexes of prev_pid and next_pid
  int prev_state = -1;             // and of prev_state (-1: every gap counts as blocked)
  std::vector<uint8_t> is_wakeup;  // sched_wakeup, by kernel event id
  int woken = -1;                  // its field naming the woken thread (pid)
};

// sched_switch's prev_state: the task state bits below TASK_REPORT_MAX (0x100, "R+" when
// set alone: preempted); none of them set is a runnable thread switched out.
bool switched_out_runnable(uint64_t prev_state) { return (prev_state & 0xff) == 0; }

// False without sched_switch events (or with ones of different layouts).
bool find_switches(Trace& trace, SwitchEvents* out) {
  out->is_switch.assign(trace.kernel_events().size(), 0);
  out->is_wakeup.assign(trace.kernel_events().size(), 0);
  bool any = false;
  for (const EventInfo& e : trace.kernel_events()) {
    if (e.full_name() == "sched:sched_wakeup") {
      const int w = field_index(e, "pid");
      if (w >= 0 && (out->woken < 0 || w == out->woken)) {
        out->woken = w;
        out->is_wakeup[e.id] = 1;
      }
      continue;
    }
    if (e.full_name() != "sched:sched_switch") continue;
    const int p = field_index(e, "prev_pid"), n = field_index(e, "next_pid");
    const int st = field_index(e, "prev_state");
    if (p < 0 || n < 0 ||
        (out->prev >= 0 && (p != out->prev || n != out->next || st != out->prev_state))) {
      continue;
    }
    out->prev = p;
    out->next = n;
    out->prev_state = st;
    out->is_switch[e.id] = 1;
    any = true;
  }
  return any;
}

// One traced thread's state between switches.
class ThreadClock {
 public:
  explicit ThreadClock(ThreadTimes* times) : times_(times) {}

  void switched_out(uint64_t t, bool runnable) {
    if (in_ && t >= in_ns_) times_->on.push_back(t - in_ns_);
    // Switched out twice without a sign of running between: that gap's end is unknown, and
    // it is not counted.
    in_ = false;
    out_ = true;
    out_runnable_ = runnable;
    out_ns_ = t;
  }
  // Woken (made runnable): a blocked gap ends here, and its wait for a CPU begins.
  void woken(uint64_t t) {
    if (!out_ || out_runnable_ || t < out_ns_) return;
    times_->off.push_back(t - out_ns_);
    out_runnable_ = true;
    out_ns_ = t;
  }
  void switched_in(uint64_t t) {
    if (out_ && t >= out_ns_)
      (out_runnable_ ? times_->runnable : times_->off).push_back(t - out_ns_);
    out_ = false;
    in_ = true;
    in_ns_ = t;
  }
  // A record the thread wrote itself, or a kernel event in its context: it is on a CPU. The
  // kernel does not always log the switch in (6.18 omits many switches from the idle task to
  // a thread woken by a timer): after a switch out, the thread's first sign of running ends
  // its gap, a few microseconds after the switch that was not logged.
  void running(uint64_t t) {
    if (out_) switched_in(t);
  }

 private:
  ThreadTimes* times_;
  uint64_t in_ns_ = 0, out_ns_ = 0;
  bool in_ = false, out_ = false, out_runnable_ = false;
};

// Slices of the traced threads of one run, by thread name; false without sched_switch.
bool switches(Trace& trace, std::map<std::string, ThreadTimes>* out) {
  SwitchEvents sw;
  if (!find_switches(trace, &sw)) return false;
  // The traced threads are those with a ring (the kernel's pid filter also keeps the other
  // side of their switches: idle, other processes), from the trace's thread list: the merged
  // reader learns a thread's id only when it reaches the thread's records. The reader's
  // thread index is the list's index.
  const std::vector<ThreadInfo> threads = trace.threads();
  std::unordered_map<uint64_t, ThreadClock> clocks;
  for (const ThreadInfo& t : threads) {
    if (!t.kernel && t.tid != 0) clocks.try_emplace(t.tid, &(*out)[t.name]);
  }
  auto clock_of = [&](uint64_t tid) -> ThreadClock* {
    auto it = clocks.find(tid);
    return it == clocks.end() ? nullptr : &it->second;
  };
  auto records = trace.read_all_with_kernel();
  Record r;
  while (records->next(&r)) {
    if (!r.event->is_kernel) {
      if (r.thread >= threads.size()) continue;
      if (ThreadClock* c = clock_of(threads[r.thread].tid)) c->running(r.time_ns);
      continue;
    }
    if (!sw.is_switch[r.event->id]) {
      if (ThreadClock* c = clock_of(r.task)) c->running(r.time_ns);  // the waker, for a wake-up
      if (sw.is_wakeup[r.event->id] && sw.woken < static_cast<int>(r.field_count)) {
        if (ThreadClock* c = clock_of(r.values[sw.woken].bits)) c->woken(r.time_ns);
      }
      continue;
    }
    if (ThreadClock* c = clock_of(r.values[sw.prev].bits)) {
      c->switched_out(r.time_ns,
                      sw.prev_state >= 0 && switched_out_runnable(r.values[sw.prev_state].bits));
    }
    if (ThreadClock* c = clock_of(r.values[sw.next].bits)) c->switched_in(r.time_ns);
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
    using Times = std::vector<uint64_t> ThreadTimes::*;
    for (const auto& [what, times] : {std::pair<const char*, Times>{"on-CPU", &ThreadTimes::on},
                                      {"off-CPU", &ThreadTimes::off},
                                      {"waiting for a CPU", &ThreadTimes::runnable}}) {
      SubjectSamples s;
      s.kind = "thread";
      s.name = fmt::format("{} {}", name, what);
      for (const auto& run : runs_a) s.a.add_run(run.at(name).*times);
      for (const auto& run : runs_b) s.b.add_run(run.at(name).*times);
      if (s.a.count() == 0 || s.b.count() == 0) continue;
      subjects->push_back(std::move(s));
    }
  }
}

}  // namespace nanotrace::diff
