// TraceRows: the events, intervals, io_stages and losses rows of one trace, made in one pass
// over its records. Its identity (nodes, trace id, damage) is trace_identity.cc's; its traces
// rows, one per node, are traces_table_rows.cc's.
#include "ship/trace_rows.hpp"

#include <fmt/format.h>

#include <unordered_map>

#include "base/utf8.hpp"
#include "nanotrace/intervals.hpp"

namespace nanotrace::ship {
namespace {

// Bytes of values at which a block is sent whatever its rows: its memory, here and in the
// server, stays bounded for rows with long strings.
constexpr size_t kMaxBlockBytes = 64u << 20;

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

// What a row needs of a thread, resolved once per thread stream.
struct TraceRows::ThreadRow {
  bool known = false;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t node = 0;    // index into nodes_
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
  // (node, tid) -> thread stream (user threads): tids of two machines are not one thread.
  std::unordered_map<uint64_t, uint32_t> tid_thread;
  std::vector<std::string> pair_labels;  // per rule, valid text
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
      t.node = self.node_of_process(info.process);
      if (!info.kernel && info.process < self.trace_.processes().size()) {
        t.process = utf8::valid(self.trace_.processes()[info.process].process_name);
      }
      if (!info.kernel) tid_thread.emplace(uint64_t{t.node} << 32 | info.tid, index);
    }
    t.known = true;
    return t;
  }

  // The traced thread of `node` a kernel record ran in (its task), or null.
  const ThreadRow* task_thread(uint32_t node, uint32_t task) {
    auto it = tid_thread.find(uint64_t{node} << 32 | task);
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

TraceRows::TraceRows(Trace& trace, std::vector<PairRule> pairs) : trace_(trace) {
  if (pairs.empty()) pairs = infer_pairs(trace);
  for (const PairRule& p : pairs) {
    auto resolved = resolve_pair_with_kernel(trace, p);
    if (resolved.ok()) {
      rules_.push_back(std::move(*resolved));
    } else {
      skipped_.push_back(fmt::format("{}: {}", p.label(), resolved.status().message()));
    }
  }
}

std::vector<std::string> TraceRows::pair_labels() const {
  std::vector<std::string> out;
  for (const ResolvedPair& r : rules_) out.push_back(utf8::valid(r.rule.label()));
  return out;
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
  const ThreadRow* owner = r.event->is_kernel ? task_thread(t.node, r.task) : &t;
  NodeRow& node = self.nodes_[owner ? owner->node : t.node];
  if (!node.any) node.first_ns = realtime;
  node.any = true;
  node.last_ns = realtime;
  ++node.events;
  events.put_date(kDate, day_of(realtime));
  events.put<uint64_t>(kTraceId, self.trace_id_);
  events.put_string(kNode, node.name);
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
  // A kernel begin record's node and task ride in the interval's tag (set when it opened).
  const auto task = static_cast<uint32_t>(i.tag);
  const ThreadRow* begin =
      task != 0 ? task_thread(static_cast<uint32_t>(i.tag >> 32), task) : &thread(i.begin_thread);
  const ThreadRow& closer = thread(i.end_thread);
  // The key as `nanotrace latency` shows it: the end record's key field(s), '+' between.
  const bool kernel = end.event->is_kernel;
  const int key = (kernel ? rule.kernel_key_field : rule.key_field)[end.event->id];
  text = format_value(end.values[key]);
  for (int f : (kernel ? rule.kernel_more_key_fields : rule.more_key_fields)[end.event->id]) {
    text.push_back('+');
    text.append(format_value(end.values[f]));
  }
  NodeRow& node = self.nodes_[begin ? begin->node : closer.node];
  ++node.intervals;
  intervals.put_date(kIDate, day_of(origin + i.begin_ns));
  intervals.put<uint64_t>(kITraceId, self.trace_id_);
  intervals.put_string(kINode, node.name);
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
  for (const ResolvedPair& r : rules_) d.pair_labels.push_back(utf8::valid(r.rule.label()));
  // The threads known now, so that a kernel record finds its task's thread before that
  // thread's first record.
  for (uint32_t i = 0; i < records->threads().size(); ++i) d.thread(i);
  IntervalMatcher matcher(rules_);
  // Without iograph I/Os or kernel events (kNotFound) there are no io_stages rows.
  auto tracker = IoStageTracker::create(trace_);
  stages_ = tracker.ok() ? std::move(*tracker) : nullptr;
  Record r;
  bool first = true;
  first_ns_ = last_ns_ = trace_.time_origin().realtime_ns;  // a trace without records
  while (records->next(&r)) {
    const uint64_t realtime = trace_.time_origin().realtime_ns + r.time_ns;
    if (first) first_ns_ = realtime;
    first = false;
    last_ns_ = realtime;
    d.event_row(r);
    if (stages_) stages_->add(r);
    for (const IntervalMatch& m : matcher.add(r)) {
      if (m.kind == IntervalMatch::Kind::kBegin) {
        *m.tag = r.event->is_kernel ? uint64_t{d.thread(r.thread).node} << 32 | r.task : 0;
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
  damage_ = damage_of(trace_, records->threads());
  if (Status s = write_io_stages(d, batch_rows, sink); !s.ok()) return s;
  return write_losses(d, sink);
}

// After every record: an I/O's times are final only then (a late kernel record may still
// stamp a stage of a completed I/O, as analyze_breakdown counts it).
Status TraceRows::write_io_stages(Impl& d, size_t batch_rows, const BlockSink& sink) {
  if (!stages_) return Status::Ok();
  const uint64_t origin = trace_.time_origin().realtime_ns;
  NativeBlock block = block_for(io_stages_table());
  auto flush = [&]() -> Status {
    counts_.ios += block.rows();
    Status s = block.rows() > 0 ? sink(io_stages_table(), block) : Status::Ok();
    block.clear();
    return s;
  };
  for (const IoStages& io : stages_->completed()) {
    const ThreadRow& t = d.thread(io.thread);
    NodeRow& node = nodes_[t.node];
    ++node.ios;
    size_t c = 0;
    block.put_date(c++, day_of(origin + io.ns[0]));
    block.put<uint64_t>(c++, trace_id_);
    block.put_string(c++, node.name);
    block.put<uint32_t>(c++, t.pid);
    block.put_string(c++, t.process);
    block.put<uint32_t>(c++, t.tid);
    block.put_string(c++, t.thread);
    block.put<uint64_t>(c++, io.user_data);
    block.put<uint64_t>(c++, io.dev);
    block.put<uint64_t>(c++, io.sector);
    for (int i = 0; i < kIoTimes; ++i)
      block.put<uint64_t>(c++, io.found(i) ? origin + io.ns[i] : 0);
    block.put<uint8_t>(c++, io.joined() ? 1 : 0);
    block.put<uint8_t>(c++, io.ordered() ? 1 : 0);
    for (int s = 0; s < kIoTimes; ++s) block.put<uint64_t>(c++, io.stage_ns(s));
    block.end_row();
    if (block.rows() >= batch_rows) {
      if (Status s = flush(); !s.ok()) return s;
    }
  }
  return flush();
}

uint16_t TraceRows::first_day() const { return day_of(first_ns_); }
uint16_t TraceRows::last_day() const { return day_of(last_ns_); }

Status TraceRows::write_losses(Impl& d, const BlockSink& sink) {
  NativeBlock block = block_for(losses_table());
  const uint16_t date = day_of(first_ns_);
  auto row = [&](uint32_t node, uint32_t pid, const std::string& process, uint32_t tid,
                 const std::string& thread, uint32_t slot, uint32_t generation, bool kernel,
                 const char* cause, uint64_t records, uint64_t corrupt_blocks = 0) {
    if (records == 0 && corrupt_blocks == 0) return;
    size_t c = 0;
    block.put_date(c++, date);
    block.put<uint64_t>(c++, trace_id_);
    block.put_string(c++, nodes_[node].name);
    block.put<uint32_t>(c++, pid);
    block.put_string(c++, process);
    block.put<uint32_t>(c++, tid);
    block.put_string(c++, thread);
    block.put<uint32_t>(c++, slot);
    block.put<uint32_t>(c++, generation);
    block.put<uint8_t>(c++, kernel ? 1 : 0);
    block.put_string(c++, cause);
    block.put<uint64_t>(c++, records);
    block.put<uint64_t>(c++, corrupt_blocks);
    block.end_row();
    counts_.lost_records += records;
    nodes_[node].lost += records;
    nodes_[node].corrupt_blocks += corrupt_blocks;
  };
  const std::vector<ThreadStats>& threads = d.source.threads();
  for (uint32_t i = 0; i < threads.size(); ++i) {
    const ThreadStats& s = threads[i];
    const ThreadRow& t = d.thread(i);
    for (auto [cause, records] :
         {std::pair{"overwritten", s.overwritten}, {"dropped", s.dropped}}) {
      row(t.node, t.pid, t.process, t.tid, t.thread, s.info.slot, s.info.generation, s.info.kernel,
          cause, records);
    }
    // A kernel CPU's corrupt sub-buffer held an unknown number of events: 0 records.
    row(t.node, t.pid, t.process, t.tid, t.thread, s.info.slot, s.info.generation, s.info.kernel,
        "corrupt", s.unreadable, s.corrupt_blocks);
  }
  const std::vector<ProcessInfo>& processes = trace_.processes();
  for (uint32_t i = 0; i < processes.size(); ++i) {
    const ProcessInfo& p = processes[i];
    const std::string name = utf8::valid(p.process_name);
    row(node_of_process(i), p.pid, name, 0, "", 0, 0, false, "no_slot", p.lost_no_slot);
    row(node_of_process(i), p.pid, name, 0, "", 0, 0, false, "reclaimed", p.lost_reclaimed);
  }
  counts_.losses = block.rows();
  if (block.rows() == 0) return Status::Ok();
  return sink(losses_table(), block);
}
}  // namespace nanotrace::ship
