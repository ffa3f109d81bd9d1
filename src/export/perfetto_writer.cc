// Perfetto protobuf export: a Trace of TracePackets with TrackEvents, encoded by hand (no
// SDK), as docs/reference/synthetic-track-event.md of Perfetto describes. Opens in
// ui.perfetto.dev and trace_processor.
//
// - One process TrackDescriptor per process (a trace of several processes, from `nanotrace
//   run`, has several) and one thread TrackDescriptor per nanotrace thread, a child of its
//   own process's track.
// - Every record is an INSTANT TrackEvent on its thread's track, with the event's name
//   ("group:event"), its group as category and its fields as debug annotations, except:
// - for a --slice rule, a begin record opens a slice (BEGIN) on a "lane" track of the
//   begin record's process, the first lane free at that time, and the end record the
//   IntervalMatcher pairs
//   with it closes it (END), so overlapping requests never break nesting; an end without a
//   begin is an instant. Memory: one map entry per open interval.
// - A thread with lost records gets a "nanotrace:lost" instant with the count at its end.
// - Names are interned (Perfetto's InternedData): the packet of an event's first record
//   carries its category, name and new field names with their interning ids (iid), and every
//   TrackEvent refers to them by iid (category_iids, name_iid, DebugAnnotation.name_iid), with
//   SEQ_NEEDS_INCREMENTAL_STATE; the first packet of the sequence clears the state.
// - Kernel events (a file recorded with --kernel) are Perfetto's own ftrace packets
//   (perfetto_ftrace.hpp): the UI draws CPU tracks and thread states from them. A ProcessTree
//   names the traced threads and processes, a SystemInfo the recording kernel's uname
//   (trace processor decodes sched_switch by its version); FtraceStats carry ftrace's losses per
//   CPU, and a CPU with losses also gets its "nanotrace:lost" instant on a track of its own under a
//   "kernel (ftrace)" track.
// Timestamps: CLOCK_MONOTONIC ns (the trace's time_origin().monotonic_ns + time_ns; every
// record's time_ns counts from that origin). The first packet declares it: a
// ClockSnapshot (REALTIME and MONOTONIC at the origin, MONOTONIC the primary trace clock; with
// kernel events also the sequence clock of ftrace bundles) and MONOTONIC as the sequence's
// default timestamp clock, since a TracePacket's timestamp is BOOTTIME unless said otherwise.
// The encoder is protobuf_writer.hpp. A record whose event's names are interned already is
// encoded through a raw pointer straight into the output (TextSink: a second thread writes
// the filled buffers); everything else (descriptors, interned data, ftrace bundles) is built
// in a scratch buffer and appended. Without slice rules or kernel events every record is an
// instant, and the records are not decoded at all: export_perfetto_instants() merges their
// raw bytes (raw_merge.hpp) and instant() encodes each from its slots (perfetto_instant.hpp).
// The output is the same byte for byte as through write().
#include <algorithm>
#include <set>
#include <unordered_map>
#include <utility>

#include "export/json_sink.hpp"
#include "export/node_groups.hpp"
#include "export/output.hpp"
#include "export/perfetto_ftrace.hpp"
#include "export/perfetto_instant.hpp"
#include "export/protobuf_writer.hpp"
#include "export/raw_merge.hpp"
#include "export/writers.hpp"
#include "nanotrace/intervals.hpp"
#include "reader/record_walk.hpp"

namespace nanotrace::exporter {
namespace {

constexpr uint32_t kSequenceId = 1;
// Track uuids. Every record names its thread's track: thread uuids are small (a varint of 3
// bytes for the first million threads), above the process uuids (at most 65536 processes).
constexpr uint64_t kProcessUuid = 1;
constexpr uint64_t kThreadUuidBase = 1u << 17;
constexpr uint64_t kLaneUuidBase = 0x6e616e6f20000000ull;
constexpr uint64_t kKernelUuid = 0x6e616e6f30000000ull;
enum EventType : uint64_t { kBegin = 1, kEnd = 2, kInstant = 3 };
// BuiltinClock values (perfetto/common/builtin_clock.proto).
constexpr uint64_t kClockRealtime = 1;
constexpr uint64_t kClockMonotonic = 3;

// TracePacket.sequence_flags: the packet refers to interned data (SEQ_NEEDS_INCREMENTAL_STATE).
constexpr uint64_t kSeqNeedsIncrementalState = 2;
// The largest TracePacket of one record: its header and track event (64 bytes at most), and
// per field an annotation (32) with a string repaired (3 bytes per byte of text at most).
constexpr size_t kMaxRecordPacket = 64 + abi::kMaxFields * (32 + 3 * size_t{abi::kMaxStringBytes});

// The interning ids (iid) of one event's names in the sequence's tables: its category (the
// group), its name ("group:event") and its fields' debug annotation names. 0: not yet.
struct InternedEvent {
  uint64_t category = 0;
  uint64_t name = 0;
  std::vector<uint64_t> field_names;  // by field
  // The same, encoded for instants (instant()): the TrackEvent's category_iids and name_iid,
  // and each field's annotation. named: a field has value names (track_event() then).
  ProtoRaw::Encoded names_encoded;
  std::vector<AnnotationPlan> annotations;
  bool named = false;
};

// The lanes of one slice rule: an open interval's tag is its lane.
struct Lanes {
  std::set<uint32_t> free;
  uint32_t count = 0;
};

class PerfettoWriter : public RecordWriter {
 public:
  PerfettoWriter(const ExportOptions& options, std::vector<ResolvedPair> slices)
      : options_(options), slices_(std::move(slices)), intervals_(slices_) {}

  Status begin(const Trace& trace, RecordSource& source) override {
    return start(trace, source.threads());
  }
  // begin(), given the threads' list (the record stream's threads()).
  Status start(const Trace& trace, const std::vector<ThreadStats>& threads) {
    Status st = sink_.open(options_.output, kMaxRecordPacket);
    if (!st.ok()) return st;
    trace_ = &trace;
    const abi::ClockPair& origin = trace.time_origin();
    base_ns_ = origin.monotonic_ns;
    processes_ = std::max<uint32_t>(1, static_cast<uint32_t>(trace.processes().size()));
    lane_sets_.assign(slices_.size() * processes_, {});
    const std::vector<EventInfo>& events = trace.events();
    slice_of_.assign(events.size() + 1, -1);
    for (size_t s = 0; s < slices_.size(); ++s) {
      for (size_t id = 0; id < slices_[s].role.size(); ++id) {
        if (slices_[s].role[id] != 0 && slice_of_[id] < 0) slice_of_[id] = static_cast<int>(s);
      }
    }
    write_clock_snapshot(origin, !trace.kernel_events().empty());
    // A merged trace's nodes: each process named after its node, labelled with it, and under
    // a pid of its own (node_groups.hpp).
    const ProcessLabels labels = process_labels(trace);
    write_processes(trace, labels);
    write_threads(threads, labels);
    last_ts_.assign(threads.size(), 0);
    if (!trace.kernel_events().empty()) {
      ftrace_ = std::make_unique<FtraceBundleWriter>(trace.kernel_events(), kSequenceId);
      write_system_info(trace, kSequenceId, &side_);
      write_process_tree(trace, threads, kSequenceId, base_ns_, &side_);
      write_ftrace_stats(threads, false, kSequenceId, base_ns_, &side_);
    }
    emit_side();
    return Status::Ok();
  }

  void write(const Record& r) override {
    uint64_t ts = base_ns_ + r.time_ns;
    last_ts_[r.thread] = ts;
    if (r.event->is_kernel) {  // an FtraceEvent; never part of a slice
      if (ftrace_) ftrace_->add(r, ts, &side_);
      emit_side();
      return;
    }
    // Without slice rules every record is an instant on its thread's track.
    if (slices_.empty()) return event(r, ts, kInstant, kThreadUuidBase + r.thread, true);
    // Every record goes through the matcher, which watches sequence numbers for losses.
    const std::vector<IntervalMatch>& matches = intervals_.add(r);
    int s = slice_of_[r.event->id];
    if (s < 0) {
      event(r, ts, kInstant, kThreadUuidBase + r.thread, true);
      return;
    }
    const IntervalMatch* m = nullptr;
    for (const IntervalMatch& x : matches) {
      if (x.rule == static_cast<uint32_t>(s)) m = &x;
    }
    if (m == nullptr || m->kind == IntervalMatch::Kind::kUnmatchedEnd) {
      event(r, ts, kInstant, kThreadUuidBase + r.thread, true);
      return;
    }
    if (m->kind == IntervalMatch::Kind::kBegin) {
      // The lanes of the begin record's process: its slices show under it.
      uint32_t set = static_cast<uint32_t>(s) * processes_ + process_of_thread_[r.thread];
      const uint64_t older = m->interval.tag;
      if (m->replaced) {  // begun again before it ended: close the older one, free its lane
        event(r, ts, kEnd, lane_uuid(lane_set_of(older), lane_of(older)), false);
        lane_sets_[lane_set_of(older)].free.insert(lane_of(older));
      }
      Lanes& lanes = lane_sets_[set];
      uint32_t lane;
      if (m->replaced && lane_set_of(older) == set) {
        lane = lane_of(older);  // the new one takes its lane
        lanes.free.erase(lane);
      } else if (lanes.free.empty()) {
        lane = lanes.count++;
        lane_descriptor(s, set, lane);
      } else {
        lane = *lanes.free.begin();
        lanes.free.erase(lanes.free.begin());
      }
      *m->tag = uint64_t{set} << 32 | lane;
      event(r, ts, kBegin, lane_uuid(set, lane), true);
      return;
    }
    uint64_t tag = m->interval.tag;
    lane_sets_[lane_set_of(tag)].free.insert(lane_of(tag));
    event(r, ts, kEnd, lane_uuid(lane_set_of(tag), lane_of(tag)), true);
  }

  // write() without slice rules or kernel events, from a record's bytes: an instant encoded
  // from its slots once its event's names are interned. An event's first record (which
  // carries them) and records of events with value names are decoded and go through write().
  void write_raw(const RawRecordMerge::Raw& raw) {
    const uint64_t ts = base_ns_ + trace_->ticks_to_ns(raw.ticks);
    const auto id = static_cast<uint16_t>(reader::load_u64(raw.data) & 0xffff);
    if (id < interned_.size() && interned_[id].name != 0 && !interned_[id].named) {
      last_ts_[raw.thread] = ts;
      uint32_t at = abi::kWord0Bytes;
      return instant(raw.thread, ts, interned_[id], [&](const AnnotationPlan& plan, ProtoRaw& out) {
        uint64_t bits = 0;
        std::string_view text;
        read_slot(raw.data, plan.kind, &at, &bits, &text);
        write_value(plan.kind, bits, text, out, &repaired_);
      });
    }
    Record& r = decoded_;
    reader::decode_record(*trace_, raw.data, 0, raw.size, 0, &r);
    r.ticks = raw.ticks;
    r.time_ns = trace_->ticks_to_ns(raw.ticks);
    r.seq = raw.seq;
    r.thread = raw.thread;
    write(r);
  }

  Status finish(RecordSource& source, ExportSummary* summary) override {
    return finish(source.threads(), summary);
  }
  // finish(), given the threads' list as the record stream ended.
  Status finish(const std::vector<ThreadStats>& threads, ExportSummary* summary) {
    Proto w(&side_);
    uint64_t end_ts = base_ns_;
    for (uint64_t ts : last_ts_) end_ts = std::max(end_ts, ts);
    if (ftrace_) {
      ftrace_->flush(&side_);
      write_ftrace_stats(threads, true, kSequenceId, end_ts, &side_);
    }
    bool kernel_track = false;
    for (size_t i = 0; i < threads.size(); ++i) {
      if (threads[i].lost() == 0) continue;
      if (threads[i].info.kernel) {
        // A CPU's losses: an instant on a track of its own under one "kernel (ftrace)" track.
        if (!kernel_track) {
          kernel_track = true;
          size_t pkt = w.begin(1);
          w.uint(10, kSequenceId);
          size_t td = w.begin(60);
          w.uint(1, kKernelUuid);
          w.bytes(2, "kernel (ftrace)");
          w.end(td);
          w.end(pkt);
        }
        size_t pkt = w.begin(1);
        w.uint(10, kSequenceId);
        size_t td = w.begin(60);
        w.uint(1, kThreadUuidBase + i);
        w.uint(5, kKernelUuid);
        w.bytes(2, fmt::format("CPU {}", threads[i].info.slot));
        w.end(td);
        w.end(pkt);
      }
      size_t pkt = w.begin(1);
      w.uint(8, last_ts_[i] ? last_ts_[i] : base_ns_);
      w.uint(10, kSequenceId);
      size_t te = w.begin(11);
      w.uint(9, kInstant);
      w.uint(11, kThreadUuidBase + i);
      w.bytes(22, "nanotrace");
      w.bytes(23, "nanotrace:lost");
      size_t da = w.begin(4);
      w.bytes(10, "records");
      w.uint(3, threads[i].lost());
      w.end(da);
      w.end(te);
      w.end(pkt);
    }
    emit_side();
    summary->bytes_written = sink_.bytes();
    summary->buffer_bytes = sink_.buffer_bytes() + side_.capacity();
    return sink_.close();
  }

 private:
  // The first packet: the sequence's defaults and the clocks (ftrace's too, if kernel events).
  void write_clock_snapshot(const abi::ClockPair& origin, bool kernel) {
    Proto w(&side_);
    size_t pkt = w.begin(1);
    w.uint(10, kSequenceId);
    w.uint(13, 1);                  // SEQ_INCREMENTAL_STATE_CLEARED
    size_t defaults = w.begin(59);  // trace_packet_defaults
    w.uint(58, kClockMonotonic);    // timestamp_clock_id
    w.end(defaults);
    size_t snapshot = w.begin(6);  // clock_snapshot
    for (auto [clock, ns] : {std::pair{kClockRealtime, origin.realtime_ns},
                             std::pair{kClockMonotonic, origin.monotonic_ns}}) {
      size_t c = w.begin(1);
      w.uint(1, clock);
      w.uint(2, ns);
      w.end(c);
    }
    if (kernel) {
      // The clock ftrace bundles are stamped in (perfetto_ftrace.hpp): CLOCK_MONOTONIC.
      size_t c = w.begin(1);
      w.uint(1, kFtraceSequenceClock);
      w.uint(2, origin.monotonic_ns);
      w.end(c);
    }
    w.uint(2, kClockMonotonic);  // primary_trace_clock
    w.end(snapshot);
    w.end(pkt);
  }

  // A track descriptor per process.
  void write_processes(const Trace& trace, const ProcessLabels& labels) {
    Proto w(&side_);
    for (uint32_t i = 0; i < trace.processes().size(); ++i) {
      size_t pkt = w.begin(1);
      w.uint(10, kSequenceId);
      size_t td = w.begin(60);
      w.uint(1, kProcessUuid + i);
      size_t pd = w.begin(3);
      w.uint(1, labels.pids[i]);
      w.bytes(6, labels.names[i]);
      if (labels.multi_node) {
        w.bytes(8, "node=" + trace.nodes()[trace.processes()[i].node].hostname);
      }
      w.end(pd);
      w.end(td);
      w.end(pkt);
    }
  }

  // A track descriptor per thread, under its process (a CPU's records go to ftrace bundles).
  void write_threads(const std::vector<ThreadStats>& threads, const ProcessLabels& labels) {
    Proto w(&side_);
    process_of_thread_.clear();
    instant_heads_.clear();
    for (size_t i = 0; i < threads.size(); ++i) {
      instant_heads_.push_back(ProtoRaw::uints({{9, kInstant}, {11, kThreadUuidBase + i}}));
      if (threads[i].info.kernel) {
        process_of_thread_.push_back(0);
        continue;
      }
      uint32_t process = threads[i].info.process < processes_ ? threads[i].info.process : 0;
      process_of_thread_.push_back(process);
      size_t pkt = w.begin(1);
      w.uint(10, kSequenceId);
      size_t td = w.begin(60);
      w.uint(1, kThreadUuidBase + i);
      w.uint(5, kProcessUuid + process);
      size_t th = w.begin(4);
      w.uint(1, labels.pid_of(threads[i].info));
      w.uint(2, threads[i].info.tid);
      w.bytes(5, threads[i].info.name);
      w.end(th);
      w.end(td);
      w.end(pkt);
    }
  }
  // Lane sets: one per (slice rule, process), numbered rule * processes + process; an open
  // interval's tag is its set << 32 | its lane.
  static uint32_t lane_set_of(uint64_t tag) { return static_cast<uint32_t>(tag >> 32); }
  static uint32_t lane_of(uint64_t tag) { return static_cast<uint32_t>(tag); }
  static uint64_t lane_uuid(uint32_t set, uint32_t lane) {
    return kLaneUuidBase + (uint64_t{set} << 24) + lane;
  }

  void lane_descriptor(int slice, uint32_t set, uint32_t lane) {
    Proto w(&side_);
    size_t pkt = w.begin(1);
    w.uint(10, kSequenceId);
    size_t td = w.begin(60);
    w.uint(1, lane_uuid(set, lane));
    w.uint(5, kProcessUuid + set % processes_);
    w.bytes(2, fmt::format("{} #{}", slices_[slice].rule.begin, lane));
    w.end(td);
    w.end(pkt);
    emit_side();
  }

  // Appends the packets built in side_ to the output.
  void emit_side() {
    if (side_.size() == 0) return;
    sink_.append(std::string_view(side_.data(), side_.size()));
    side_.clear();
  }

  // The interning ids of event id's names (its group as category, "group:event", its field
  // names); on the event's first record, its new entries go into that record's packet.
  const InternedEvent& intern(const EventInfo& e, Proto& w) {
    if (e.id >= interned_.size()) interned_.resize(e.id + 1);
    InternedEvent& in = interned_[e.id];
    if (in.name != 0) return in;
    size_t data = w.begin(12);  // interned_data
    auto add = [&](uint32_t table, std::unordered_map<std::string, uint64_t>& ids,
                   const std::string& text) {
      auto [it, added] = ids.emplace(text, ids.size() + 1);
      if (added) {
        size_t entry = w.begin(table);
        w.uint(1, it->second);  // iid
        w.bytes(2, text);       // name
        w.end(entry);
      }
      return it->second;
    };
    in.category = add(1, category_iids_, e.group);  // event_categories
    in.name = add(2, name_iids_, e.full_name());    // event_names
    in.names_encoded = ProtoRaw::uints({{3, in.category}, {10, in.name}});
    for (uint32_t i = 0; i < e.fields.size(); ++i) {
      const FieldInfo& f = e.fields[i];
      in.field_names.push_back(add(3, annotation_name_iids_, f.name));  // debug_annotation_names
      in.annotations.push_back(annotation_plan(in.field_names.back(), e.layout.type(i)));
      in.named = in.named || !f.value_names.empty();
    }
    w.end(data);
    return in;
  }

  // One record's TracePacket. The hot path, for an event whose names are interned already:
  // the whole packet through a raw pointer into the output. The first record of an event
  // carries the interned names in its packet, built in side_.
  void event(const Record& r, uint64_t ts, EventType type, uint64_t track, bool with_fields) {
    const uint16_t id = r.event->id;
    if (id < interned_.size() && interned_[id].name != 0) {
      if (type == kInstant && with_fields && !interned_[id].named) {
        const FieldValue* v = r.values;
        return instant(r.thread, ts, interned_[id], [&](const AnnotationPlan& plan, ProtoRaw& raw) {
          write_value(plan.kind, v->bits, v->text, raw, &repaired_);
          ++v;
        });
      }
      ProtoRaw raw(sink_.cursor());
      char* pkt = raw.begin(1);
      raw.uint(8, ts);
      raw.uint(10, kSequenceId);
      raw.uint(13, kSeqNeedsIncrementalState);
      track_event(r, type, track, with_fields, interned_[id], raw);
      raw.end(pkt);
      sink_.commit(raw.pos());
      return;
    }
    Proto w(&side_);
    size_t pkt = w.begin(1);
    w.uint(8, ts);
    w.uint(10, kSequenceId);
    w.uint(13, kSeqNeedsIncrementalState);
    const InternedEvent& names = intern(*r.event, w);
    ProtoRaw raw(w.room(kMaxRecordPacket));
    track_event(r, type, track, with_fields, names, raw);
    w.commit(raw.pos());
    w.end(pkt);
    emit_side();
  }

  // The most common packet, an instant on its thread's track, as event() and track_event()
  // write it, from bytes encoded beforehand. value(plan, raw): each field's value in turn.
  template <class Value>
  void instant(uint32_t thread, uint64_t ts, const InternedEvent& names, Value&& value) {
    ProtoRaw raw(sink_.cursor());
    char* pkt = raw.begin(1);
    raw.uint(8, ts);
    raw.encoded(sequence_head_);
    char* te = raw.begin(11);
    raw.encoded(instant_heads_[thread]);
    raw.encoded(names.names_encoded);
    for (const AnnotationPlan& plan : names.annotations) {
      char* da = raw.begin(4);
      raw.encoded(plan.head);
      value(plan, raw);
      raw.end(da);
    }
    raw.end(te);
    raw.end(pkt);
    sink_.commit(raw.pos());
  }

  // The record's TrackEvent: type, track, names by iid and its fields as debug annotations.
  static void track_event(const Record& r, EventType type, uint64_t track, bool with_fields,
                          const InternedEvent& names, ProtoRaw& raw) {
    char* te = raw.begin(11);
    raw.uint(9, type);
    raw.uint(11, track);
    if (type != kEnd) {
      raw.uint(3, names.category);  // category_iids
      raw.uint(10, names.name);     // name_iid
    }
    const uint32_t fields = with_fields ? r.field_count : 0;
    const FieldInfo* info = r.event->fields.data();
    for (uint32_t i = 0; i < fields; ++i) {
      char* da = raw.begin(4);
      raw.uint(1, names.field_names[i]);  // name_iid
      if (info[i].value_names.empty()) {
        annotation_value(r.values[i], raw);
      } else {
        annotation_value(named_value(info[i], r.values[i]), raw);
      }
      raw.end(da);
    }
    raw.end(te);
  }

  // A debug annotation's value field, by the value's type.
  static void annotation_value(const FieldValue& v, ProtoRaw& raw) {
    switch (v.type) {
      case abi::FieldType::kI8:
      case abi::FieldType::kI16:
      case abi::FieldType::kI32:
      case abi::FieldType::kI64:
        return raw.uint(4, v.bits);  // int64 as two's complement varint
      case abi::FieldType::kF32:
      case abi::FieldType::kF64:
        return raw.fixed64(5, v.bits);
      case abi::FieldType::kBool:
        return raw.uint(2, v.bits != 0);
      case abi::FieldType::kString:
        // Protobuf strings must be valid UTF-8.
        if (utf8::is_valid(v.text)) return raw.raw_bytes(6, v.text);
        return raw.raw_bytes(6, utf8::valid(v.text));
      case abi::FieldType::kPointer:
        return raw.uint(7, v.bits);
      default:
        return raw.uint(3, v.bits);
    }
  }

  ExportOptions options_;
  std::vector<ResolvedPair> slices_;
  IntervalMatcher intervals_;
  uint32_t processes_ = 1;
  std::vector<Lanes> lane_sets_;             // by lane set (lane_set_of)
  std::vector<uint32_t> process_of_thread_;  // by thread index: its process's index
  // instant()'s bytes: each packet's sequence fields, and per thread its TrackEvent's type
  // (INSTANT) and track.
  const ProtoRaw::Encoded sequence_head_ =
      ProtoRaw::uints({{10, kSequenceId}, {13, kSeqNeedsIncrementalState}});
  std::vector<ProtoRaw::Encoded> instant_heads_;
  std::string repaired_;  // write_value()'s copy of a string that was not valid UTF-8
  const Trace* trace_ = nullptr;
  Record decoded_;  // write_raw()'s record when it decodes one
  TextSink sink_;
  fmt::memory_buffer side_;  // packets built with Proto, appended to sink_ in order
  uint64_t base_ns_ = 0;
  std::vector<int> slice_of_;
  std::vector<uint64_t> last_ts_;
  // Interning (one sequence): ids by event id, and each table's ids by text.
  std::vector<InternedEvent> interned_;
  std::unordered_map<std::string, uint64_t> category_iids_, name_iids_, annotation_name_iids_;
  std::unique_ptr<FtraceBundleWriter> ftrace_;  // set when the trace has kernel events
};

}  // namespace

std::unique_ptr<RecordWriter> make_perfetto_writer(const ExportOptions& options,
                                                   std::vector<ResolvedPair> slices) {
  return std::make_unique<PerfettoWriter>(options, std::move(slices));
}

Result<ExportSummary> export_perfetto_instants(Trace& trace, const ExportOptions& options) {
  RawRecordMerge merge(trace);
  RawRecordMerge::Raw raw;
  if (!merge.next(&raw)) return no_records(trace);
  PerfettoWriter writer(options, {});
  Status st = writer.start(trace, merge.threads());
  if (!st.ok()) return st;
  ExportSummary summary;
  do {
    writer.write_raw(raw);
    ++summary.records;
  } while (merge.next(&raw));
  const std::vector<ThreadStats> threads = merge.threads();
  st = writer.finish(threads, &summary);
  if (!st.ok()) return st;
  count_losses(threads, &summary);
  return summary;
}

}  // namespace nanotrace::exporter
