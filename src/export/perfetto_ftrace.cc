// Kernel records as Perfetto FtraceEventBundles. Field numbers are those of Perfetto's protos
// (protos/perfetto/trace/ftrace/ftrace_event.proto, ftrace_event_bundle.proto, sched.proto,
// block.proto, generic.proto, ftrace_stats.proto; ps/process_tree.proto).
//
// - Each kernel record is one FtraceEvent: timestamp, pid (the task that logged it, 0 for
//   idle or an interrupt) and its typed message. The kernel's field names are the protos'
//   (Perfetto generates its protos from the kernel's formats), so each field goes to the
//   proto field of its name; a field the proto lacks is left out, a proto field the kernel
//   lacks is absent. Events the schema has no message for (io_uring, syscalls, ...) are
//   GenericFtraceEvents: their name and every field, as trace processor's ftrace_event
//   table shows them.
// - A CPU's events are buffered and written as one bundle when 64 KiB are pending, and at
//   the end; bundles of different CPUs overlap in time, as Perfetto's own do (trace
//   processor sorts what is not written by the tracing service at the end of the file).
// - Timestamps: a bundle's timestamps are BOOTTIME for trace processor unless its
//   ftrace_clock says otherwise; "global" (and "local") make them the sequence's clock 64,
//   which the writer's ClockSnapshot declares equal to CLOCK_MONOTONIC (older trace
//   processors read "global" as CLOCK_MONOTONIC itself: the same result).
#include "export/perfetto_ftrace.hpp"

#include <span>
#include <string_view>

#include "export/protobuf_writer.hpp"

namespace nanotrace::exporter {
namespace {

// TracePacket fields.
constexpr uint32_t kPacket = 1;  // Trace.packet
constexpr uint32_t kPacketTimestamp = 8;
constexpr uint32_t kPacketSequenceId = 10;  // trusted_packet_sequence_id
constexpr uint32_t kPacketFtraceEvents = 1;
constexpr uint32_t kPacketProcessTree = 2;
constexpr uint32_t kPacketFtraceStats = 34;
constexpr uint32_t kPacketSystemInfo = 45;
// FtraceEventBundle and FtraceEvent fields.
constexpr uint32_t kBundleCpu = 1;
constexpr uint32_t kBundleEvent = 2;
constexpr uint32_t kBundleFtraceClock = 5;
constexpr uint64_t kFtraceClockGlobal = 2;  // FtraceClock.FTRACE_CLOCK_GLOBAL
constexpr uint32_t kEventTimestamp = 1;
constexpr uint32_t kEventPid = 2;
constexpr uint32_t kEventGeneric = 327;  // GenericFtraceEvent
constexpr size_t kBundleBytes = 64 << 10;

enum class Kind : uint8_t { kString, kSigned, kUnsigned };

struct SchemaField {
  std::string_view name;
  uint32_t number;
  Kind kind;
};

constexpr Kind S = Kind::kString;
constexpr Kind I = Kind::kSigned;
constexpr Kind U = Kind::kUnsigned;

constexpr SchemaField kSwitch[] = {{"prev_comm", 1, S},  {"prev_pid", 2, I},  {"prev_prio", 3, I},
                                   {"prev_state", 4, I}, {"next_comm", 5, S}, {"next_pid", 6, I},
                                   {"next_prio", 7, I}};
constexpr SchemaField kWakeup[] = {
    {"comm", 1, S}, {"pid", 2, I}, {"prio", 3, I}, {"success", 4, I}, {"target_cpu", 5, I}};
constexpr SchemaField kExec[] = {{"filename", 1, S}, {"pid", 2, I}, {"old_pid", 3, I}};
constexpr SchemaField kExit[] = {{"comm", 1, S}, {"pid", 2, I}, {"tgid", 3, I}, {"prio", 4, I}};
constexpr SchemaField kFork[] = {
    {"parent_comm", 1, S}, {"parent_pid", 2, I}, {"child_comm", 3, S}, {"child_pid", 4, I}};
constexpr SchemaField kCommPidPrio[] = {{"comm", 1, S}, {"pid", 2, I}, {"prio", 3, I}};
constexpr SchemaField kHang[] = {{"comm", 1, S}, {"pid", 2, I}};
constexpr SchemaField kPiSetprio[] = {
    {"comm", 1, S}, {"newprio", 2, I}, {"oldprio", 3, I}, {"pid", 4, I}};
constexpr SchemaField kMigrate[] = {{"comm", 1, S},     {"pid", 2, I},      {"prio", 3, I},
                                    {"orig_cpu", 4, I}, {"dest_cpu", 5, I}, {"running", 6, I},
                                    {"load", 7, U}};
constexpr SchemaField kRqInsert[] = {{"dev", 1, U},   {"sector", 2, U}, {"nr_sector", 3, U},
                                     {"bytes", 4, U}, {"rwbs", 5, S},   {"comm", 6, S},
                                     {"cmd", 7, S}};
// Newer kernels call the field "error", older ones "errors": the proto has both.
constexpr SchemaField kRqComplete[] = {{"dev", 1, U},    {"sector", 2, U}, {"nr_sector", 3, U},
                                       {"errors", 4, I}, {"rwbs", 5, S},   {"cmd", 6, S},
                                       {"error", 7, I}};
constexpr SchemaField kRqError[] = {{"dev", 1, U},    {"sector", 2, U}, {"nr_sector", 3, U},
                                    {"errors", 4, I}, {"rwbs", 5, S},   {"cmd", 6, S}};
constexpr SchemaField kRqRemap[] = {{"dev", 1, U},     {"sector", 2, U},     {"nr_sector", 3, U},
                                    {"old_dev", 4, U}, {"old_sector", 5, U}, {"nr_bios", 6, U},
                                    {"rwbs", 7, S}};
constexpr SchemaField kBio[] = {
    {"dev", 1, U}, {"sector", 2, U}, {"nr_sector", 3, U}, {"rwbs", 4, S}, {"comm", 5, S}};
constexpr SchemaField kBioComplete[] = {
    {"dev", 1, U}, {"sector", 2, U}, {"nr_sector", 3, U}, {"error", 4, I}, {"rwbs", 5, S}};
constexpr SchemaField kBioRemap[] = {{"dev", 1, U},     {"sector", 2, U},     {"nr_sector", 3, U},
                                     {"old_dev", 4, U}, {"old_sector", 5, U}, {"rwbs", 6, S}};
constexpr SchemaField kBuffer[] = {{"dev", 1, U}, {"sector", 2, U}, {"size", 3, U}};
constexpr SchemaField kPlug[] = {{"comm", 1, S}};
constexpr SchemaField kSplit[] = {
    {"dev", 1, U}, {"sector", 2, U}, {"new_sector", 3, U}, {"rwbs", 4, S}, {"comm", 5, S}};
constexpr SchemaField kUnplug[] = {{"nr_rq", 1, I}, {"comm", 2, S}};
constexpr SchemaField kIo[] = {{"dev", 1, U},   {"sector", 2, U}, {"nr_sector", 3, U},
                               {"bytes", 4, U}, {"ioprio", 5, U}, {"rwbs", 6, S},
                               {"comm", 7, S},  {"cmd", 8, S}};

// A typed FtraceEvent message: its FtraceEvent field number and its fields.
struct SchemaEvent {
  std::string_view system;
  std::string_view name;
  uint32_t number;
  std::span<const SchemaField> fields;
};

constexpr SchemaEvent kSchema[] = {
    {"sched", "sched_switch", 4, kSwitch},
    {"sched", "sched_wakeup", 17, kWakeup},
    {"sched", "sched_waking", 20, kWakeup},
    {"sched", "sched_wakeup_new", 114, kWakeup},
    {"sched", "sched_process_exec", 237, kExec},
    {"sched", "sched_process_exit", 238, kExit},
    {"sched", "sched_process_fork", 239, kFork},
    {"sched", "sched_process_free", 240, kCommPidPrio},
    {"sched", "sched_process_hang", 241, kHang},
    {"sched", "sched_process_wait", 242, kCommPidPrio},
    {"sched", "sched_pi_setprio", 353, kPiSetprio},
    {"sched", "sched_migrate_task", 491, kMigrate},
    {"block", "block_rq_issue", 45, kRqInsert},
    {"block", "block_rq_insert", 126, kRqInsert},
    {"block", "block_rq_complete", 125, kRqComplete},
    {"block", "block_rq_requeue", 129, kRqError},
    {"block", "block_rq_abort", 124, kRqError},
    {"block", "block_rq_remap", 128, kRqRemap},
    {"block", "block_bio_backmerge", 115, kBio},
    {"block", "block_bio_bounce", 116, kBio},
    {"block", "block_bio_complete", 117, kBioComplete},
    {"block", "block_bio_frontmerge", 118, kBio},
    {"block", "block_bio_queue", 119, kBio},
    {"block", "block_bio_remap", 120, kBioRemap},
    {"block", "block_dirty_buffer", 121, kBuffer},
    {"block", "block_getrq", 122, kBio},
    {"block", "block_plug", 123, kPlug},
    {"block", "block_sleeprq", 130, kBio},
    {"block", "block_split", 131, kSplit},
    {"block", "block_touch_buffer", 132, kBuffer},
    {"block", "block_unplug", 133, kUnplug},
    {"block", "block_io_start", 546, kIo},
    {"block", "block_io_done", 547, kIo},
};

bool is_string(abi::FieldType t) { return t == abi::FieldType::kString; }
bool is_signed(abi::FieldType t) {
  return t == abi::FieldType::kI8 || t == abi::FieldType::kI16 || t == abi::FieldType::kI32 ||
         t == abi::FieldType::kI64;
}

}  // namespace

// How one kernel event is encoded: its FtraceEvent field (kEventGeneric: a
// GenericFtraceEvent) and, for a typed message, each of its fields' proto field (0: none).
struct FtraceBundleWriter::Mapping {
  uint32_t message = kEventGeneric;
  std::vector<uint32_t> field_numbers;
};

FtraceBundleWriter::FtraceBundleWriter(const std::vector<EventInfo>& kernel_events,
                                       uint32_t sequence_id)
    : sequence_id_(sequence_id) {
  by_event_.resize(kernel_events.size());
  for (size_t i = 0; i < kernel_events.size(); ++i) {
    const EventInfo& e = kernel_events[i];
    for (const SchemaEvent& s : kSchema) {
      if (s.system != e.group || s.name != e.name) continue;
      Mapping& m = by_event_[i];
      m.message = s.number;
      m.field_numbers.assign(e.fields.size(), 0);
      for (size_t f = 0; f < e.fields.size(); ++f) {
        for (const SchemaField& sf : s.fields) {
          if (sf.name != e.fields[f].name) continue;
          // A value of another shape than the proto field's (a kernel that changed the
          // field's type) is left out rather than misread.
          const bool text = is_string(e.fields[f].type);
          if (text == (sf.kind == Kind::kString)) m.field_numbers[f] = sf.number;
        }
      }
    }
  }
}

FtraceBundleWriter::~FtraceBundleWriter() = default;

void FtraceBundleWriter::add(const Record& r, uint64_t ts, fmt::memory_buffer* out) {
  if (r.cpu >= pending_.size()) pending_.resize(r.cpu + 1);
  if (!pending_[r.cpu]) pending_[r.cpu] = std::make_unique<fmt::memory_buffer>();
  fmt::memory_buffer* buf = pending_[r.cpu].get();
  Proto w(buf);
  size_t event = w.begin(kBundleEvent);
  w.uint(kEventTimestamp, ts);  // first, then pid, then the message: trace processor's fast path
  w.uint(kEventPid, r.task);
  const Mapping* m = r.event->id < by_event_.size() ? &by_event_[r.event->id] : nullptr;
  if (m && m->message != kEventGeneric) {
    size_t msg = w.begin(m->message);
    for (uint32_t i = 0; i < r.field_count && i < m->field_numbers.size(); ++i) {
      const uint32_t number = m->field_numbers[i];
      if (number == 0) continue;
      const FieldValue& v = r.values[i];
      if (is_string(v.type)) {
        w.bytes(number, v.text);
      } else {
        w.uint(number, v.bits);  // signed values are sign-extended: int32/int64 encoding
      }
    }
    w.end(msg);
  } else {
    size_t msg = w.begin(kEventGeneric);
    w.bytes(1, r.event->name);  // event_name: the event without its system, as Perfetto writes
    for (uint32_t i = 0; i < r.field_count; ++i) {
      const FieldValue& v = r.values[i];
      size_t field = w.begin(2);
      w.bytes(1, r.event->fields[i].name);
      if (is_string(v.type)) {
        w.bytes(3, v.text);  // str_value
      } else if (is_signed(v.type)) {
        w.uint(4, v.bits);  // int_value
      } else {
        w.uint(5, v.bits);  // uint_value
      }
      w.end(field);
    }
    w.end(msg);
  }
  w.end(event);
  if (buf->size() >= kBundleBytes) flush_cpu(r.cpu, out);
}

void FtraceBundleWriter::flush(fmt::memory_buffer* out) {
  for (uint32_t cpu = 0; cpu < pending_.size(); ++cpu) flush_cpu(cpu, out);
}

void FtraceBundleWriter::flush_cpu(uint32_t cpu, fmt::memory_buffer* out) {
  fmt::memory_buffer* events = pending_[cpu].get();
  if (!events || events->size() == 0) return;
  Proto w(out);
  size_t packet = w.begin(kPacket);
  w.uint(kPacketSequenceId, sequence_id_);
  size_t bundle = w.begin(kPacketFtraceEvents);
  w.uint(kBundleCpu, cpu);
  w.uint(kBundleFtraceClock, kFtraceClockGlobal);
  w.append_encoded(*events);
  w.end(bundle);
  w.end(packet);
  events->clear();
}

void write_process_tree(const Trace& trace, const std::vector<ThreadStats>& threads,
                        uint32_t sequence_id, uint64_t ts, fmt::memory_buffer* out) {
  Proto w(out);
  size_t packet = w.begin(kPacket);
  w.uint(kPacketTimestamp, ts);
  w.uint(kPacketSequenceId, sequence_id);
  size_t tree = w.begin(kPacketProcessTree);
  for (const ProcessInfo& p : trace.processes()) {
    size_t process = w.begin(1);  // ProcessTree.processes
    w.uint(1, p.pid);
    if (p.parent_pid != 0) w.uint(2, p.parent_pid);  // ppid
    w.bytes(3, p.process_name);                      // cmdline
    w.end(process);
  }
  for (const ThreadStats& t : threads) {
    if (t.info.kernel) continue;
    size_t thread = w.begin(2);  // ProcessTree.threads
    w.uint(1, t.info.tid);
    w.bytes(2, t.info.name);
    w.uint(3, t.info.pid);  // tgid
    w.end(thread);
  }
  w.end(tree);
  w.end(packet);
}

void write_ftrace_stats(const std::vector<ThreadStats>& threads, bool end, uint32_t sequence_id,
                        uint64_t ts, fmt::memory_buffer* out) {
  Proto w(out);
  size_t packet = w.begin(kPacket);
  w.uint(kPacketTimestamp, ts);
  w.uint(kPacketSequenceId, sequence_id);
  size_t stats = w.begin(kPacketFtraceStats);
  w.uint(1, end ? 2 : 1);  // phase: END_OF_TRACE, START_OF_TRACE
  for (const ThreadStats& t : threads) {
    if (!t.info.kernel) continue;
    size_t cpu = w.begin(2);             // FtraceStats.cpu_stats
    w.uint(1, t.info.slot);              // the CPU
    w.uint(3, end ? t.overwritten : 0);  // overrun
    w.uint(8, end ? t.dropped : 0);      // dropped_events
    w.end(cpu);
  }
  w.end(stats);
  w.end(packet);
}

void write_system_info(const Trace& trace, uint32_t sequence_id, fmt::memory_buffer* out) {
  const Trace::KernelSystem k = trace.kernel_system();
  if (k.sysname.empty() && k.release.empty()) return;  // recorded before uname was stored
  Proto w(out);
  size_t packet = w.begin(kPacket);
  w.uint(kPacketSequenceId, sequence_id);
  size_t info = w.begin(kPacketSystemInfo);
  size_t uts = w.begin(1);  // SystemInfo.utsname
  w.bytes(1, k.sysname);    // Utsname.sysname
  w.bytes(2, k.version);
  w.bytes(3, k.release);
  w.bytes(4, k.machine);
  w.end(uts);
  w.end(info);
  w.end(packet);
}

}  // namespace nanotrace::exporter
