// LiveView: which processes are followed (the named ones, or every live one of the node,
// looked for at each sample), one pass over each per sample, and the frame built from them.
#include "live/live_view.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "base/clock.hpp"
#include "base/process.hpp"
#include "live/process_follower.hpp"

namespace nanotrace::live {
namespace {

// Samples an exited process stays in the frame (marked not alive) before it is forgotten.
constexpr int kExitedFrames = 3;

LatencySummary summary(const LatencyHistogram& h) {
  return {h.count(), h.quantile(0.5), h.quantile(0.99), h.max()};
}

// A segment file, told apart from a later one at the same path.
using FileId = std::pair<uint64_t, uint64_t>;  // device, inode

bool file_id(const std::string& path, FileId* out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  *out = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  return true;
}

}  // namespace

struct LiveView::Impl {
  LiveOptions options;
  Totals totals;
  struct Followed {
    std::unique_ptr<ProcessFollower> follower;
    FileId file;
    int exited_frames = 0;  // samples since it exited
  };
  std::vector<Followed> followed;
  std::set<FileId> ignored;  // segments of processes not running, or unreadable
  std::vector<std::string> notes;
  uint64_t sequence = 0;
  double last_sample = 0;

  void follow(std::unique_ptr<Trace> trace, const FileId& file) {
    followed.push_back(
        {std::make_unique<ProcessFollower>(std::move(trace), options.rules, options.max_open),
         file});
  }
  void discover();
  Status check_rules() const;
  void collect_waiters(LiveFrame* frame);
  LiveFrame build_frame(double interval);
};

void LiveView::Impl::discover() {
  for (const sys::SegmentName& segment : sys::list_segment_names()) {
    FileId id;
    if (!file_id(segment.path, &id) || ignored.count(id)) continue;
    bool known = false;
    for (const Followed& f : followed) known = known || f.file == id;
    if (known) continue;
    auto trace = Trace::open_path(segment.path);
    if (!trace.ok()) {
      // Being created (it validates on a later sample) or damaged: said once, then left.
      notes.push_back(segment.path + ": " + trace.status().message());
      ignored.insert(id);
      continue;
    }
    if (!(*trace)->process().alive) {
      ignored.insert(id);  // left behind by a process that is gone
      continue;
    }
    follow(std::move(*trace), id);
  }
}

// Every given rule names events of at least one followed process (none followed: nothing to
// check against yet).
Status LiveView::Impl::check_rules() const {
  for (const PairRule& rule : options.rules) {
    Status first_error;
    bool resolved = false;
    for (const Followed& f : followed) {
      auto r = resolve_pair_with_kernel(f.follower->trace(), rule);
      if (r.ok()) resolved = true;
      if (!r.ok() && first_error.ok()) first_error = r.status();
    }
    if (!resolved && !followed.empty()) {
      return Status(first_error.code(), "pair rule " + rule.label() + ": " + first_error.message());
    }
  }
  return Status::Ok();
}

LiveView::LiveView() : impl_(std::make_unique<Impl>()) {}
LiveView::~LiveView() = default;

Result<std::unique_ptr<LiveView>> LiveView::create(const LiveOptions& options) {
  std::unique_ptr<LiveView> view(new LiveView());
  Impl& m = *view->impl_;
  m.options = options;
  for (const std::string& source : options.sources) {
    auto trace = Trace::open(source);
    if (!trace.ok()) return trace.status();
    if ((*trace)->is_file()) {
      return Status::Invalid(source +
                             " is a trace file: top follows live processes (`nanotrace latency` "
                             "and `stats` read files)");
    }
    const ProcessInfo& p = (*trace)->process();
    if (!p.alive) {
      return Status::Invalid("process " + std::to_string(p.pid) + " (" + source +
                             ") is not running: top follows live processes");
    }
    FileId id;
    if (!file_id(p.path, &id)) return Status::NotFound("no nanotrace segment at " + p.path);
    m.follow(std::move(*trace), id);
  }
  if (options.sources.empty()) m.discover();
  if (Status s = m.check_rules(); !s.ok()) return s;
  return view;
}

LiveFrame LiveView::sample() {
  Impl& m = *impl_;
  const double now = sys::monotonic_seconds();
  const double interval = m.sequence == 0 ? 0 : now - m.last_sample;
  m.last_sample = now;
  if (m.options.sources.empty()) m.discover();
  for (EventTotals& e : m.totals.events) {
    e.count = 0;
    e.processes = 0;
  }
  for (PairTotals& p : m.totals.pairs) p.last.clear();
  const bool counting = m.sequence > 0;
  for (Impl::Followed& f : m.followed) {
    f.follower->stats().missed_interval = 0;
    if (!f.follower->pass(&m.totals, counting)) ++f.exited_frames;
  }
  // The passes add to the interval's histograms only (one add a pair, not two).
  for (PairTotals& p : m.totals.pairs) p.total.merge(p.last);
  LiveFrame frame = m.build_frame(interval);
  // Forgotten after being shown as exited for a few samples (the rules' totals stay).
  std::erase_if(m.followed,
                [](const Impl::Followed& f) { return f.exited_frames > kExitedFrames; });
  ++m.sequence;
  return frame;
}

LiveFrame LiveView::Impl::build_frame(double interval) {
  LiveFrame frame;
  frame.sequence = sequence;
  frame.realtime_ns = sys::realtime_ns();
  frame.interval_s = interval;
  frame.notes = std::move(notes);
  notes.clear();
  auto rate = [&](uint64_t n) { return interval > 0 ? static_cast<double>(n) / interval : 0.0; };
  for (Followed& f : followed) {
    LiveProcess p = f.follower->stats();
    p.records_per_second = rate(p.records);
    frame.processes.push_back(std::move(p));
  }
  std::sort(frame.processes.begin(), frame.processes.end(),
            [](const LiveProcess& a, const LiveProcess& b) { return a.pid < b.pid; });
  for (const EventTotals& e : totals.events) {
    if (e.total == 0) continue;
    frame.events.push_back({e.name, e.count, rate(e.count), e.total, e.processes});
  }
  std::sort(frame.events.begin(), frame.events.end(),
            [](const LiveEvent& a, const LiveEvent& b) { return a.event < b.event; });
  for (uint32_t i = 0; i < totals.pairs.size(); ++i) {
    const PairTotals& t = totals.pairs[i];
    LivePair p;
    p.rule = t.rule;
    p.inferred = t.inferred;
    p.last = summary(t.last);
    p.total = summary(t.total);
    for (Followed& f : followed) {
      for (ProcessFollower::Rule& r : f.follower->rules()) {
        if (r.pair != i) continue;
        ++p.processes;
        p.open += r.open->size();
        p.replaced += r.open->replaced();
        p.unmatched_ends += r.open->unmatched_ends();
        auto oldest = r.open->oldest(1);
        if (oldest.empty() || !f.follower->stats().alive) continue;
        const Trace& trace = f.follower->trace();
        const uint64_t now = trace.ticks_to_ns(f.follower->now_ticks());
        const uint64_t began = trace.ticks_to_ns(oldest[0]->begin_ticks);
        p.oldest_open_ns = std::max(p.oldest_open_ns, now > began ? now - began : 0);
      }
    }
    frame.open_total += p.open;
    frame.pairs.push_back(std::move(p));
  }
  std::sort(frame.pairs.begin(), frame.pairs.end(),
            [](const LivePair& a, const LivePair& b) { return a.rule.label() < b.rule.label(); });
  // A given rule no followed process has the events of shows as a note, not as nothing.
  for (const PairRule& rule : options.rules) {
    bool shown = false;
    for (const LivePair& p : frame.pairs) shown = shown || p.rule.label() == rule.label();
    if (!shown)
      frame.notes.push_back("pair rule " + rule.label() + ": no process followed has its events");
  }
  collect_waiters(&frame);
  return frame;
}

// The oldest operations in flight of every live process and rule: each table's oldest n are
// the candidates, the n oldest of them are shown.
void LiveView::Impl::collect_waiters(LiveFrame* frame) {
  struct Candidate {
    uint64_t age_ns;
    ProcessFollower* follower;
    const ProcessFollower::Rule* rule;
    const OpenOperation* op;
  };
  std::vector<Candidate> candidates;
  const size_t n = options.waiters;
  for (Followed& f : followed) {
    if (!f.follower->stats().alive || n == 0) continue;
    const Trace& trace = f.follower->trace();
    const uint64_t now = trace.ticks_to_ns(f.follower->now_ticks());
    for (ProcessFollower::Rule& r : f.follower->rules()) {
      for (const OpenOperation* op : r.open->oldest(n)) {
        const uint64_t began = trace.ticks_to_ns(op->begin_ticks);
        candidates.push_back({now > began ? now - began : 0, f.follower.get(), &r, op});
      }
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.age_ns > b.age_ns; });
  if (candidates.size() > n) candidates.resize(n);
  for (const Candidate& c : candidates) {
    LiveWaiter w;
    c.follower->describe(*c.rule, *c.op, &w);
    w.age_ns = c.age_ns;
    frame->waiters.push_back(std::move(w));
  }
}

}  // namespace nanotrace::live
