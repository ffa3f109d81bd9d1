// TraceRows: the events, intervals, losses and traces rows of one trace.
#include "ship/trace_rows.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <unordered_map>

#include "base/utf8.hpp"
#include "nanotrace/intervals.hpp"

namespace nanotrace::ship {
namespace {

constexpr uint64_t kNsPerDay = 86400ull * 1000000000ull;
// Bytes of values at which a block is sent whatever its rows: its memory, here and in the
// server, stays bounded for rows with long strings.
constexpr size_t kMaxBlockBytes = 64u << 20;

uint16_t day_of(uint64_t realtime_ns) { return static_cast<uint16_t>(realtime_ns / kNsPerDay); }

// FNV-1a, 64 bits: a stable hash of the trace's identity text (the same on every build).
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Column indexes of the events table (ship/schema.cc), in order.
enum EventColumn : size_t {
  kDate,
  kTraceId,
  kNode,
  kPid,
  kProcess,
  kTid,
  kThread,
  kEvent,
  kKernel,
  kCpu,
  kRealtime,
  kTicks,
  kSeq,
  kIntKeys,
  kIntValues,
  kUintKeys,
  kUintValues,
  kFloatKeys,
  kFloatValues,
  kStrKeys,
  kStrValues
};

enum IntervalColumn : size_t {
  kIDate,
  kITraceId,
  kINode,
  kIPair,
  kIBeginEvent,
  kIEndEvent,
  kIKey,
  kIPid,
  kIProcess,
  kITid,
  kIThread,
  kIEndTid,
  kIBegin,
  kIEnd,
  kILatency,
  kILostAdjacent
};

}  // namespace

NativeBlock block_for(const TableDef& table) {
  NativeBlock b;
  for (const ColumnDef& c : table.columns) b.add_column(c.name, c.type);
  return b;
}

std::string local_hostname() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

// What a row needs of a thread, resolved once per thread stream.
struct TraceRows::ThreadRow {
  bool known = false;
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string thread;   // valid UTF-8
  std::string process;  // valid UTF-8
};

// An event's names as valid text, resolved once per event.
struct TraceRows::EventNames {
  bool known = false;
  std::string full_name;
  std::vector<std::string> fields;
};

struct TraceRows::Impl {
  TraceRows& self;
  RecordSource& source;
  NativeBlock events = block_for(events_table());
  NativeBlock intervals = block_for(intervals_table());
  std::vector<ThreadRow> threads;
  std::vector<EventNames> user_events, kernel_events;
  std::unordered_map<uint32_t, uint32_t> pid_process;  // pid -> index into processes()
  std::unordered_map<uint32_t, uint32_t> tid_thread;   // tid -> thread stream (user threads)
  std::vector<std::string> pair_labels;                // per rule, valid text
  std::string text;

  const ThreadRow& thread(uint32_t index) {
    if (threads.size() <= index) threads.resize(index + 1);
    ThreadRow& t = threads[index];
    if (t.known) return t;
    const std::vector<ThreadStats>& all = source.threads();
    if (index < all.size()) {
      const ThreadInfo& info = all[index].info;
      t.pid = info.pid;
      t.tid = info.tid;
      t.thread = utf8::valid(info.name);
      if (auto it = pid_process.find(info.pid); it != pid_process.end()) {
        t.process = utf8::valid(self.trace_.processes()[it->second].process_name);
      }
      if (!info.kernel) tid_thread.emplace(info.tid, index);
    }
    t.known = true;
    return t;
  }

  // The traced thread a kernel record ran in (its task), or null.
  const ThreadRow* task_thread(uint32_t task) {
    auto it = tid_thread.find(task);
    return task == 0 || it == tid_thread.end() ? nullptr : &threads[it->second];
  }

  const EventNames& names(const EventInfo& e) {
    std::vector<EventNames>& table = e.is_kernel ? kernel_events : user_events;
    if (table.size() <= e.id) table.resize(e.id + 1);
    EventNames& n = table[e.id];
    if (n.known) return n;
    n.full_name = utf8::valid(e.full_name());
    for (const FieldInfo& f : e.fields) n.fields.push_back(utf8::valid(f.name));
    n.known = true;
    return n;
  }

  void event_row(const Record& r);
  void fields(const Record& r, const EventNames& n);
  void interval_row(const ResolvedPair& rule, uint32_t index, const Interval& i, const Record& end);
};

TraceRows::TraceRows(Trace& trace, std::string node, std::vector<PairRule> pairs) : trace_(trace) {
  if (node.empty()) node = local_hostname();
  node_ = utf8::valid(node);
  if (pairs.empty()) pairs = infer_pairs(trace);
  for (const PairRule& p : pairs) {
    auto resolved = resolve_pair_with_kernel(trace, p);
    if (resolved.ok()) {
      rules_.push_back(std::move(*resolved));
    } else {
      skipped_.push_back(fmt::format("{}: {}", p.label(), resolved.status().message()));
    }
  }
  std::string identity = node_;
  for (const ProcessInfo& p : trace.processes()) {
    identity += fmt::format("|p{} {} {} {} {}", p.pid, p.ticks_per_second, p.clock_start.ticks,
                            p.clock_start.realtime_ns, p.clock_start.monotonic_ns);
  }
  for (const ThreadInfo& t : trace.threads()) {
    identity += fmt::format("|t{} {} {} {} {}", t.pid, t.slot, t.generation, t.tid, t.written);
  }
  trace_id_ = fnv1a(identity);
}

void TraceRows::Impl::fields(const Record& r, const EventNames& n) {
  using abi::FieldType;
  // Keys first, values second, per array: four passes over a handful of fields.
  for (uint32_t i = 0; i < r.field_count; ++i) {
    const FieldValue& v = r.values[i];
    const std::string& key = n.fields[i];
    switch (v.type) {
      case FieldType::kI8:
      case FieldType::kI16:
      case FieldType::kI32:
      case FieldType::kI64:
      case FieldType::kBool:
        events.put_string(kIntKeys, key);
        events.put<int64_t>(kIntValues, v.as_int());
        break;
      case FieldType::kU8:
      case FieldType::kU16:
      case FieldType::kU32:
      case FieldType::kU64:
      case FieldType::kPointer:
        events.put_string(kUintKeys, key);
        events.put<uint64_t>(kUintValues, v.bits);
        break;
      case FieldType::kF32:
      case FieldType::kF64:
        events.put_string(kFloatKeys, key);
        events.put<double>(kFloatValues, v.as_double());
        break;
      case FieldType::kString:
        events.put_string(kStrKeys, key);
        events.put_text(kStrValues, v.text);
        break;
      default:
        break;
    }
    // An enum value with a name: the name too, as text under the same key.
    if (v.type != FieldType::kString && !r.event->fields[i].value_names.empty()) {
      if (const std::string* name = r.event->fields[i].name_of(v.bits)) {
        events.put_string(kStrKeys, key);
        events.put_text(kStrValues, *name);
      }
    }
  }
  for (size_t c : {kIntKeys, kIntValues, kUintKeys, kUintValues, kFloatKeys, kFloatValues, kStrKeys,
                   kStrValues}) {
    events.end_array(c);
  }
}

void TraceRows::Impl::event_row(const Record& r) {
  const uint64_t realtime = self.trace_.time_origin().realtime_ns + r.time_ns;
  const ThreadRow& t = thread(r.thread);
  const ThreadRow* owner = r.event->is_kernel ? task_thread(r.task) : &t;
  events.put<uint16_t>(kDate, day_of(realtime));
  events.put<uint64_t>(kTraceId, self.trace_id_);
  events.put_string(kNode, self.node_);
  events.put<uint32_t>(kPid, owner ? owner->pid : 0);
  events.put_string(kProcess, owner ? owner->process : std::string());
  events.put<uint32_t>(kTid, r.event->is_kernel ? r.task : t.tid);
  events.put_string(kThread, owner ? owner->thread : t.thread);
  const EventNames& n = names(*r.event);
  events.put_string(kEvent, n.full_name);
  events.put<uint8_t>(kKernel, r.event->is_kernel ? 1 : 0);
  events.put<uint32_t>(kCpu, r.cpu);
  events.put<uint64_t>(kRealtime, realtime);
  events.put<uint64_t>(kTicks, r.ticks);
  events.put<uint64_t>(kSeq, r.seq);
  fields(r, n);
  events.end_row();
}

void TraceRows::Impl::interval_row(const ResolvedPair& rule, uint32_t index, const Interval& i,
                                   const Record& end) {
  const uint64_t origin = self.trace_.time_origin().realtime_ns;
  // A kernel begin record's task rides in the interval's tag (set when it opened).
  const auto task = static_cast<uint32_t>(i.tag);
  const ThreadRow* begin = task != 0 ? task_thread(task) : &thread(i.begin_thread);
  const ThreadRow& closer = thread(i.end_thread);
  // The key as `nanotrace latency` shows it: the end record's key field(s), '+' between.
  const bool kernel = end.event->is_kernel;
  const int key = (kernel ? rule.kernel_key_field : rule.key_field)[end.event->id];
  text = format_value(end.values[key]);
  for (int f : (kernel ? rule.kernel_more_key_fields : rule.more_key_fields)[end.event->id]) {
    text.push_back('+');
    text.append(format_value(end.values[f]));
  }
  intervals.put<uint16_t>(kIDate, day_of(origin + i.begin_ns));
  intervals.put<uint64_t>(kITraceId, self.trace_id_);
  intervals.put_string(kINode, self.node_);
  intervals.put_string(kIPair, pair_labels[index]);
  intervals.put_text(kIBeginEvent, rule.rule.begin);
  intervals.put_text(kIEndEvent, rule.rule.end);
  intervals.put_text(kIKey, text);
  intervals.put<uint32_t>(kIPid, begin ? begin->pid : 0);
  intervals.put_string(kIProcess, begin ? begin->process : std::string());
  intervals.put<uint32_t>(kITid, begin ? begin->tid : task);
  intervals.put_string(kIThread, begin ? begin->thread : std::string());
  intervals.put<uint32_t>(kIEndTid, kernel ? end.task : closer.tid);
  intervals.put<uint64_t>(kIBegin, origin + i.begin_ns);
  intervals.put<uint64_t>(kIEnd, origin + i.end_ns);
  intervals.put<uint64_t>(kILatency, i.latency_ns());
  intervals.put<uint8_t>(kILostAdjacent, i.lost_adjacent ? 1 : 0);
  intervals.end_row();
}

Status TraceRows::write(size_t batch_rows, const BlockSink& sink) {
  counts_ = {};
  auto records = trace_.read_all_with_kernel();
  Impl d{*this, *records};
  for (size_t p = 0; p < trace_.processes().size(); ++p) {
    d.pid_process.emplace(trace_.processes()[p].pid, static_cast<uint32_t>(p));
  }
  for (const ResolvedPair& r : rules_) d.pair_labels.push_back(utf8::valid(r.rule.label()));
  IntervalMatcher matcher(rules_);
  Record r;
  bool first = true;
  first_ns_ = last_ns_ = trace_.time_origin().realtime_ns;  // a trace without records
  while (records->next(&r)) {
    const uint64_t realtime = trace_.time_origin().realtime_ns + r.time_ns;
    if (first) first_ns_ = realtime;
    first = false;
    last_ns_ = realtime;
    d.event_row(r);
    for (const IntervalMatch& m : matcher.add(r)) {
      if (m.kind == IntervalMatch::Kind::kBegin) {
        *m.tag = r.event->is_kernel ? r.task : 0;
      } else if (m.kind == IntervalMatch::Kind::kEnd) {
        d.interval_row(rules_[m.rule], m.rule, m.interval, r);
      }
    }
    // A block also ends at kMaxBlockBytes (checked now and then: bytes() walks the columns).
    if (d.events.rows() >= batch_rows ||
        (d.events.rows() % 1024 == 0 && d.events.bytes() >= kMaxBlockBytes)) {
      counts_.events += d.events.rows();
      if (Status s = sink(events_table(), d.events); !s.ok()) return s;
      d.events.clear();
    }
    if (d.intervals.rows() >= batch_rows ||
        (d.intervals.rows() % 1024 == 1023 && d.intervals.bytes() >= kMaxBlockBytes)) {
      counts_.intervals += d.intervals.rows();
      if (Status s = sink(intervals_table(), d.intervals); !s.ok()) return s;
      d.intervals.clear();
    }
  }
  counts_.events += d.events.rows();
  counts_.intervals += d.intervals.rows();
  if (d.events.rows() > 0) {
    if (Status s = sink(events_table(), d.events); !s.ok()) return s;
  }
  if (d.intervals.rows() > 0) {
    if (Status s = sink(intervals_table(), d.intervals); !s.ok()) return s;
  }
  return write_losses(d, sink);
}

uint16_t TraceRows::first_day() const { return day_of(first_ns_); }
uint16_t TraceRows::last_day() const { return day_of(last_ns_); }

Status TraceRows::write_losses(Impl& d, const BlockSink& sink) {
  NativeBlock block = block_for(losses_table());
  const uint16_t date = day_of(first_ns_);
  auto row = [&](uint32_t pid, const std::string& process, uint32_t tid, const std::string& thread,
                 uint32_t slot, uint32_t generation, bool kernel, const char* cause,
                 uint64_t records) {
    if (records == 0) return;
    size_t c = 0;
    block.put<uint16_t>(c++, date);
    block.put<uint64_t>(c++, trace_id_);
    block.put_string(c++, node_);
    block.put<uint32_t>(c++, pid);
    block.put_string(c++, process);
    block.put<uint32_t>(c++, tid);
    block.put_string(c++, thread);
    block.put<uint32_t>(c++, slot);
    block.put<uint32_t>(c++, generation);
    block.put<uint8_t>(c++, kernel ? 1 : 0);
    block.put_string(c++, cause);
    block.put<uint64_t>(c++, records);
    block.end_row();
    counts_.lost_records += records;
  };
  const std::vector<ThreadStats>& threads = d.source.threads();
  for (uint32_t i = 0; i < threads.size(); ++i) {
    const ThreadStats& s = threads[i];
    const ThreadRow& t = d.thread(i);
    row(t.pid, t.process, t.tid, t.thread, s.info.slot, s.info.generation, s.info.kernel,
        "overwritten", s.overwritten);
    row(t.pid, t.process, t.tid, t.thread, s.info.slot, s.info.generation, s.info.kernel, "dropped",
        s.dropped);
  }
  for (const ProcessInfo& p : trace_.processes()) {
    const std::string name = utf8::valid(p.process_name);
    row(p.pid, name, 0, "", 0, 0, false, "no_slot", p.lost_no_slot);
    row(p.pid, name, 0, "", 0, 0, false, "reclaimed", p.lost_reclaimed);
  }
  counts_.losses = block.rows();
  if (block.rows() == 0) return Status::Ok();
  return sink(losses_table(), block);
}

void TraceRows::traces_row(const std::string& source, NativeBlock* block) const {
  const std::vector<ProcessInfo>& processes = trace_.processes();
  // The trigger that fired (the first process whose trigger did), else the first's state.
  const ProcessInfo* fired = processes.empty() ? nullptr : &processes.front();
  for (const ProcessInfo& p : processes) {
    if (p.trigger.state == abi::TriggerState::kFired ||
        p.trigger.state == abi::TriggerState::kFrozen) {
      fired = &p;
      break;
    }
  }
  const bool has_fired = fired != nullptr && (fired->trigger.state == abi::TriggerState::kFired ||
                                              fired->trigger.state == abi::TriggerState::kFrozen);
  const EventInfo* trigger_event = has_fired ? trace_.event_by_id(fired->trigger.event) : nullptr;
  const ProcessInfo& first = trace_.process();
  const auto shipped =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  NativeBlock& b = *block;
  size_t c = 0;
  b.put<uint16_t>(c++, day_of(first_ns_));
  b.put<uint64_t>(c++, trace_id_);
  b.put_string(c++, node_);
  b.put_string(c++, "");  // machine_id: not recorded in the trace
  b.put_string(c++, "");  // boot_id: not recorded in the trace
  b.put_text(c++, source);
  b.put<uint64_t>(c++, shipped);
  b.put_string(c++, first.clock == abi::ClockKind::kTsc ? "tsc" : "monotonic");
  b.put<uint64_t>(c++, first.ticks_per_second);
  b.put<uint64_t>(c++, 0);  // clock error bound: a node's own trace is on its own clock
  b.put_string(c++, "own");
  b.put<uint64_t>(c++, first_ns_);
  b.put<uint64_t>(c++, last_ns_);
  const size_t pids = c++, names = c++;
  for (const ProcessInfo& p : processes) {
    b.put<uint32_t>(pids, p.pid);
    b.put_text(names, p.process_name);
  }
  b.end_array(pids);
  b.end_array(names);
  b.put<uint64_t>(c++, counts_.events);
  b.put<uint64_t>(c++, counts_.intervals);
  b.put<uint64_t>(c++, counts_.lost_records);
  b.put_string(c++, fired ? trigger_state_name(fired->trigger.state) : "none");
  b.put_text(c++, fired ? fired->trigger.expression : std::string());
  b.put_text(c++, trigger_event ? trigger_event->full_name() : std::string());
  b.put<uint32_t>(c++, has_fired ? fired->pid : 0);
  b.put<uint32_t>(c++, has_fired ? fired->trigger.tid : 0);
  b.put<uint64_t>(c++, has_fired ? fired->trigger.seq : 0);
  b.put<uint64_t>(c++, has_fired ? trace_.ticks_to_realtime_ns(fired->trigger.ticks) : 0);
  b.end_row();
}

}  // namespace nanotrace::ship
