// analyze_breakdown and IoStageTracker: one pass over the trace merged with its kernel
// events (time order), following each I/O through the stages by the keys each event carries
// (node = io_uring user_data, sector, device and sector of the block request), each key
// within its machine: a merged file holds several machines' I/Os and kernel events, whose
// user_data, sectors and devices are not each other's.
//
// The kernel's io_uring and block events are every process's: another program on the machine
// (two iograph runs number their nodes alike) submits the same user_data and reads the same
// sectors. An io_uring submit counts only when the I/O's own thread made it, or it names a
// ring (ctx) such a submit named before (an SQPOLL ring's thread submits for it); a
// completion only when it names the I/O's ring. A bio queued by the I/O's own thread, or by
// one of its process's io_uring workers (named iou-wrk-PID or iou-sqp-PID), names its device;
// a block request on another device does not join it, nor, once the process's devices are
// known that way, one on a device that is not among them.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "nanotrace/breakdown.hpp"
#include "reader/trace_internals.hpp"

namespace nanotrace {
namespace {

using Io = IoStages;

// Field index by name in an event, -1 if absent.
int field_index(const EventInfo& e, const char* name) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

uint64_t field(const Record& r, int i) {
  return i >= 0 && static_cast<uint32_t>(i) < r.field_count ? r.values[i].bits : 0;
}

enum class Kind {
  kNone,
  kUserSubmit,
  kUserComplete,
  kUringSubmit,
  kUringComplete,
  kBioQueue,
  kIssue,
  kDone
};

struct Binding {
  Kind kind = Kind::kNone;
  int a = -1, b = -1, c = -1;  // field indices: node/user_data, offset/dev/ctx, sector/sq_thread
  int d = -1;                  // nr_sector
};

BreakdownStage summarize(std::string name, std::vector<uint64_t> v) {
  BreakdownStage s;
  s.name = std::move(name);
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()) + 0.999999);
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
  };
  s.p50_ns = at(0.50);
  s.p90_ns = at(0.90);
  s.p99_ns = at(0.99);
  s.max_ns = v.back();
  s.mean_ns =
      static_cast<double>(std::accumulate(v.begin(), v.end(), 0.0)) / static_cast<double>(v.size());
  return s;
}

// Binds iograph's node events. Errors: kNotFound without a node_submit with an offset.
Status bind_user_events(const Trace& trace, std::vector<Binding>* user) {
  user->assign(trace.events().size() + 1, Binding{});
  bool has_submit = false;
  for (const EventInfo& e : trace.events()) {
    if (e.group != "iograph" || e.id >= user->size()) continue;
    if (e.name == "node_submit" && field_index(e, "offset") >= 0) {
      (*user)[e.id] = {Kind::kUserSubmit, field_index(e, "node"), field_index(e, "offset")};
      has_submit = true;
    } else if (e.name == "node_complete") {
      (*user)[e.id] = {Kind::kUserComplete, field_index(e, "node")};
    }
  }
  if (!has_submit) {
    return Status::NotFound("no iograph:node_submit events with an offset field in this trace");
  }
  return Status::Ok();
}

// Binds the kernel's io_uring and block request events.
std::vector<Binding> bind_kernel_events(const Trace& trace) {
  std::vector<Binding> kernel(trace.kernel_events().size());
  for (const EventInfo& e : trace.kernel_events()) {
    const std::string n = e.full_name();
    if (n == "io_uring:io_uring_submit_req" || n == "io_uring:io_uring_submit_sqe") {
      kernel[e.id] = {Kind::kUringSubmit, field_index(e, "user_data"), field_index(e, "ctx"),
                      field_index(e, "sq_thread")};
    } else if (n == "io_uring:io_uring_complete") {
      kernel[e.id] = {Kind::kUringComplete, field_index(e, "user_data"), field_index(e, "ctx")};
    } else if (n == "block:block_bio_queue") {
      kernel[e.id] = {Kind::kBioQueue, field_index(e, "dev"), field_index(e, "sector"),
                      field_index(e, "nr_sector"), field_index(e, "comm")};
    } else if (n == "block:block_rq_issue") {
      kernel[e.id] = {Kind::kIssue, field_index(e, "dev"), field_index(e, "sector"),
                      field_index(e, "nr_sector")};
    } else if (n == "block:block_rq_complete") {
      kernel[e.id] = {Kind::kDone, field_index(e, "dev"), field_index(e, "sector")};
    }
  }
  return kernel;
}

// Follows each I/O through the stages, record by record in time order, by the keys its
// events carry.
class StageTracker {
 public:
  // thread_node: the machine (Trace::nodes() index) of each Record::thread; thread_tid and
  // thread_pid: the thread and process ids of each user-space one.
  StageTracker(uint64_t kernel_start_ticks, std::vector<uint32_t> thread_node,
               std::vector<uint32_t> thread_tid, std::vector<uint32_t> thread_pid)
      : kernel_start_(kernel_start_ticks),
        thread_node_(std::move(thread_node)),
        thread_tid_(std::move(thread_tid)),
        thread_pid_(std::move(thread_pid)) {}
  void add(const Record& r, const Binding& b);
  // The I/Os that completed, and the per-stage figures of those joined with every stage; each
  // stage's latencies too, if asked (one vector per stage, in completion order).
  IoBreakdown breakdown(std::vector<std::vector<uint64_t>>* latencies) const;
  std::vector<IoStages> completed() const;  // in completion order

 private:
  void user_submit(const Record& r, const Binding& b);
  void uring_submit(const Record& r, const Binding& b);
  void bio_queue(const Record& r, const Binding& b);
  void block_issue(const Record& r, const Binding& b);
  void block_complete(const Record& r, const Binding& b);
  void uring_complete(const Record& r, const Binding& b);
  void user_complete(const Record& r, const Binding& b);
  // The time I/O i reached `stage`, the first time it does.
  void stamp(size_t i, int stage, const Record& r);

  uint32_t node_of(const Record& r) const {
    return r.thread < thread_node_.size() ? thread_node_[r.thread] : 0;
  }
  // Whether a kernel record was written in the context of I/O i's own thread.
  bool by_thread_of(const Record& r, size_t i) const {
    const uint32_t t = ios_[i].thread;
    return r.task != 0 && t < thread_tid_.size() && thread_tid_[t] == r.task;
  }
  // Whether a block record's comm names an io_uring worker of I/O i's process.
  bool by_worker_of(std::string_view comm, size_t i) const {
    const uint32_t t = ios_[i].thread;
    if (t >= thread_pid_.size()) return false;
    const std::string pid = std::to_string(thread_pid_[t]);
    return comm == "iou-wrk-" + pid || comm == "iou-sqp-" + pid;
  }
  using Key = std::pair<uint32_t, uint64_t>;  // (machine, user_data, sector or ctx)

  const uint64_t kernel_start_;
  const std::vector<uint32_t> thread_node_;
  const std::vector<uint32_t> thread_tid_;
  const std::vector<uint32_t> thread_pid_;
  std::vector<Io> ios_;
  std::vector<uint64_t> bio_dev_;  // by I/O: the device its own thread queued a bio on, or 0
  std::set<Key> own_rings_;        // (machine, ctx) of rings the traced threads submitted to
  std::set<Key> own_devices_;      // (machine, dev) the traced threads queued bios on
  std::map<Key, size_t> by_node_;  // open I/Os by node (= user_data)
  std::multimap<Key, size_t> awaiting_block_;  // by start sector, after io_uring submit
  // By (machine, dev, sector) of their block request.
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, std::vector<size_t>> in_block_;
  std::vector<size_t> finished_;
};

void StageTracker::stamp(size_t i, int stage, const Record& r) {
  if (!ios_[i].found(stage)) {
    ios_[i].ticks[stage] = r.ticks;
    ios_[i].ns[stage] = r.time_ns;
  }
}

void StageTracker::add(const Record& r, const Binding& b) {
  switch (b.kind) {
    case Kind::kNone:
      break;
    case Kind::kUserSubmit:
      user_submit(r, b);
      break;
    case Kind::kUringSubmit:
      uring_submit(r, b);
      break;
    case Kind::kBioQueue:
      bio_queue(r, b);
      break;
    case Kind::kIssue:
      block_issue(r, b);
      break;
    case Kind::kDone:
      block_complete(r, b);
      break;
    case Kind::kUringComplete:
      uring_complete(r, b);
      break;
    case Kind::kUserComplete:
      user_complete(r, b);
      break;
  }
}

void StageTracker::user_submit(const Record& r, const Binding& b) {
  if (r.ticks < kernel_start_) return;  // before kernel capture: nothing to join
  ios_.push_back({});
  bio_dev_.push_back(0);
  stamp(ios_.size() - 1, 0, r);
  ios_.back().user_data = field(r, b.a);
  ios_.back().sector = field(r, b.b) / 512;
  ios_.back().thread = r.thread;
  by_node_[{node_of(r), field(r, b.a)}] = ios_.size() - 1;
}

void StageTracker::uring_submit(const Record& r, const Binding& b) {
  const uint32_t machine = node_of(r);
  auto it = by_node_.find({machine, field(r, b.a)});
  if (it == by_node_.end() || ios_[it->second].ticks[1] != 0) return;
  const Key ring{machine, field(r, b.b)};
  const bool own_thread = by_thread_of(r, it->second);
  const bool sq_thread = b.c >= 0 && field(r, b.c) != 0;
  if (!own_thread && !own_rings_.count(ring) && !(sq_thread && own_rings_.empty())) return;
  if (own_thread || sq_thread) own_rings_.insert(ring);
  stamp(it->second, 1, r);
  ios_[it->second].ring = ring.second;
  awaiting_block_.emplace(Key{machine, ios_[it->second].sector}, it->second);
}

void StageTracker::bio_queue(const Record& r, const Binding& b) {
  const uint32_t machine = node_of(r);
  const uint64_t sector = field(r, b.b);
  const uint64_t end = sector + std::max<uint64_t>(field(r, b.c), 1);
  const std::string_view comm =
      b.d >= 0 && static_cast<uint32_t>(b.d) < r.field_count ? r.values[b.d].text : "";
  for (auto it = awaiting_block_.lower_bound({machine, sector});
       it != awaiting_block_.end() && it->first.first == machine && it->first.second < end; ++it) {
    if (!by_thread_of(r, it->second) && !by_worker_of(comm, it->second)) continue;
    bio_dev_[it->second] = field(r, b.a);
    own_devices_.insert({machine, field(r, b.a)});
  }
}

void StageTracker::block_issue(const Record& r, const Binding& b) {
  const uint32_t machine = node_of(r);
  const uint64_t dev = field(r, b.a), sector = field(r, b.b);
  const uint64_t end = sector + std::max<uint64_t>(field(r, b.c), 1);
  auto it = awaiting_block_.lower_bound({machine, sector});
  while (it != awaiting_block_.end() && it->first.first == machine && it->first.second < end) {
    const uint64_t own = bio_dev_[it->second];
    if ((own != 0 && own != dev) ||
        (own == 0 && !own_devices_.empty() && !own_devices_.count({machine, dev}))) {
      ++it;  // another device's request at the same sectors
      continue;
    }
    stamp(it->second, 2, r);
    ios_[it->second].dev = dev;
    in_block_[{machine, dev, sector}].push_back(it->second);
    it = awaiting_block_.erase(it);
  }
}

void StageTracker::block_complete(const Record& r, const Binding& b) {
  auto it = in_block_.find({node_of(r), field(r, b.a), field(r, b.b)});
  if (it == in_block_.end()) return;
  for (size_t i : it->second) stamp(i, 3, r);
  in_block_.erase(it);
}

void StageTracker::uring_complete(const Record& r, const Binding& b) {
  auto it = by_node_.find({node_of(r), field(r, b.a)});
  if (it == by_node_.end() || !ios_[it->second].found(1)) return;
  if (b.b >= 0 && field(r, b.b) != ios_[it->second].ring) return;  // another ring's request
  stamp(it->second, 4, r);
}

void StageTracker::user_complete(const Record& r, const Binding& b) {
  auto it = by_node_.find({node_of(r), field(r, b.a)});
  if (it == by_node_.end()) return;
  stamp(it->second, 5, r);
  finished_.push_back(it->second);
  by_node_.erase(it);
}

IoBreakdown StageTracker::breakdown(std::vector<std::vector<uint64_t>>* latencies) const {
  IoBreakdown out;
  std::vector<std::vector<uint64_t>> spans(kIoTimes);
  for (size_t i : finished_) {
    const Io& io = ios_[i];
    ++out.ios;
    if (!io.has_uring()) ++out.no_uring;
    if (!io.has_block()) ++out.no_block;
    if (!io.joined()) continue;
    ++out.joined;
    if (io.ordered()) ++out.ordered;
    for (int s = 0; s < kIoTimes; ++s) spans[s].push_back(io.stage_ns(s));
  }
  if (latencies != nullptr) *latencies = spans;
  for (int s = 0; s < kIoTimes; ++s) {
    out.stages.push_back(summarize(breakdown_stage_names()[s], std::move(spans[s])));
  }
  return out;
}

std::vector<IoStages> StageTracker::completed() const {
  std::vector<IoStages> out;
  out.reserve(finished_.size());
  for (size_t i : finished_) out.push_back(ios_[i]);
  return out;
}

}  // namespace

bool IoStages::joined() const {
  return std::find(std::begin(ticks), std::end(ticks), 0) == std::end(ticks);
}

bool IoStages::ordered() const {
  if (!joined()) return false;
  for (int t = 1; t < kIoTimes; ++t) {
    if (ticks[t - 1] >= ticks[t]) return false;
  }
  return true;
}

uint64_t IoStages::stage_ns(int s) const {
  const int from = s == kIoTimes - 1 ? 0 : s;
  const int to = s == kIoTimes - 1 ? kIoTimes - 1 : s + 1;
  if (s < 0 || s >= kIoTimes || !found(from) || !found(to)) return 0;
  return ns[to] > ns[from] ? ns[to] - ns[from] : 0;
}

const std::vector<std::string>& breakdown_stage_names() {
  static const std::vector<std::string> names{
      "user submit -> io_uring submit",     "io_uring submit -> block issue",
      "block issue -> block complete",      "block complete -> io_uring complete",
      "io_uring complete -> user complete", "total (user submit -> user complete)"};
  return names;
}

struct IoStageTracker::Impl {
  std::vector<Binding> user, kernel;
  std::unique_ptr<StageTracker> tracker;
};

IoStageTracker::IoStageTracker() : impl_(std::make_unique<Impl>()) {}
IoStageTracker::~IoStageTracker() = default;

Result<std::unique_ptr<IoStageTracker>> IoStageTracker::create(const Trace& trace) {
  if (trace.kernel_events().empty()) {
    return Status::NotFound("no kernel events in this trace (record with --kernel io_uring,block)");
  }
  std::unique_ptr<IoStageTracker> t(new IoStageTracker());
  if (Status s = bind_user_events(trace, &t->impl_->user); !s.ok()) return s;
  t->impl_->kernel = bind_kernel_events(trace);
  // Each record's machine, by Record::thread: the user-space threads, then the kernel CPUs
  // (Trace::read_all_with_kernel's order).
  std::vector<uint32_t> thread_node, thread_tid, thread_pid;
  for (const ThreadInfo& th : trace.threads()) {
    const bool known = th.process < trace.processes().size();
    thread_node.push_back(known ? trace.processes()[th.process].node : 0);
    thread_pid.push_back(known ? trace.processes()[th.process].pid : 0);
    thread_tid.push_back(th.tid);
  }
  for (uint32_t c = 0; c < trace.kernel_cpu_count(); ++c) {
    thread_node.push_back(reader::TraceInternals::kernel_cpu_node(trace, c));
  }
  t->impl_->tracker =
      std::make_unique<StageTracker>(trace.kernel_start_ticks(), std::move(thread_node),
                                     std::move(thread_tid), std::move(thread_pid));
  return t;
}

void IoStageTracker::add(const Record& r) {
  const std::vector<Binding>& table = r.event->is_kernel ? impl_->kernel : impl_->user;
  if (r.event->id < table.size()) impl_->tracker->add(r, table[r.event->id]);
}

std::vector<IoStages> IoStageTracker::completed() const { return impl_->tracker->completed(); }

IoBreakdown IoStageTracker::summary(std::vector<std::vector<uint64_t>>* latencies) const {
  return impl_->tracker->breakdown(latencies);
}

Result<IoBreakdown> analyze_breakdown(Trace& trace) { return analyze_breakdown(trace, nullptr); }

Result<IoBreakdown> analyze_breakdown(Trace& trace, std::vector<std::vector<uint64_t>>* latencies) {
  auto tracker = IoStageTracker::create(trace);
  if (!tracker.ok()) return tracker.status();
  auto records = trace.read_all_with_kernel();
  Record r;
  while (records->next(&r)) (*tracker)->add(r);
  return (*tracker)->summary(latencies);
}

}  // namespace nanotrace
