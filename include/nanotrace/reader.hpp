// Reading nanotrace data: attach to a traced process's live segment (by pid, by name or by
// path), list its events, groups and threads, and read its records, per thread or merged
// into one stream ordered by time, with exact per-thread loss counts.
//
// A Trace copies records out of rings while their writers keep running. A record that may
// have been overwritten during the copy is never returned: each block is validated after
// the copy (generation, position, and the writer's head), and skipped records are counted
// as lost. Every byte of the segment is treated as untrusted.
//
// Thread safety: a Trace and its readers belong to one thread at a time.
#pragma once

// The runtime a traced program links sits below the reader (src/runtime/CMakeLists.txt).
#ifdef NANOTRACE_BUILDING_RUNTIME
#error "the runtime must not include the reader's API"
#endif

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/abi.hpp"
#include "nanotrace/detail/record_layout.hpp"
#include "nanotrace/field_value.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

// A name an enum field's value carries (nanotrace/enum.hpp).
struct ValueName {
  int64_t value = 0;
  std::string name;
};

struct FieldInfo {
  std::string name;
  abi::FieldType type = abi::FieldType::kNone;
  std::vector<ValueName> value_names;  // empty unless the field is an enum with names
  // The name of an integer value, or null when it has none.
  const std::string* name_of(uint64_t bits) const;
};

struct EventInfo {
  uint16_t id = 0;  // as stored in records
  uint32_t group_index = 0;
  std::string group;
  std::string name;
  std::string format;
  std::string file;
  uint32_t line = 0;
  bool is_guard = false;  // a NANOTRACE_ENABLED() guard, not an event
  // A kernel (ftrace) event recorded with `record --kernel`: group is its system (block),
  // name its event (block_rq_issue), fields the event's own (not the common_* ones), and id
  // its index in Trace::kernel_events() (not a user-space event id).
  bool is_kernel = false;
  std::vector<FieldInfo> fields;
  // How its records are sized and decoded (invalid for a guard and a kernel event).
  abi::RecordLayout layout;
  std::string full_name() const { return group + ":" + name; }
  // Whether an event filter names it: its group ("io") or its full name ("io:submit"), as the
  // tools' --events and ColumnOptions::events take them.
  bool named_by(std::string_view filter) const {
    if (filter == group) return true;
    return filter.size() == group.size() + 1 + name.size() && filter.starts_with(group) &&
           filter[group.size()] == ':' && filter.ends_with(name);
  }
};

struct GroupInfo {
  std::string name;
  bool enabled = false;
};

struct ThreadInfo {
  uint32_t pid = 0;      // its process
  uint32_t process = 0;  // index into Trace::processes()
  uint32_t slot = 0;
  uint32_t generation = 0;
  uint32_t tid = 0;
  std::string name;
  abi::SlotState state = abi::SlotState::kFree;
  uint64_t head = 0;     // bytes written in this generation
  uint64_t written = 0;  // records written
  uint64_t dropped = 0;  // records dropped by the writer (discard/block without consumer)
  uint64_t consumed_records = 0;
  bool kernel = false;  // one CPU's kernel events (read_all_with_kernel): tid 0, name "cpuN"
};

// A process's trigger (see abi::TriggerState), as read from its segment.
struct TriggerInfo {
  abi::TriggerState state = abi::TriggerState::kNone;
  std::string expression;     // the armed expression ("" if none)
  uint64_t after_events = 0;  // the post-trigger window: events after the match
  uint64_t after_ns = 0;      // or nanoseconds after it (0: events)
  // Once fired (kFired, kFrozen): the matching record.
  uint16_t event = 0;  // its event id (Trace::event_by_id)
  uint64_t ticks = 0;  // its clock value (Trace::ticks_to_ns)
  uint64_t seq = 0;    // its per-thread record number
  uint32_t tid = 0;    // the thread that wrote it
  uint32_t slot = 0;
  uint64_t frozen_ticks = 0;  // kFrozen: clock value when the rings froze
  // A duration trigger's facts and counts (abi::DurationFacts; all 0 for a record trigger).
  // kind 1 (slow): the matching record above is the pair's end; 2 (stuck): it is the open
  // operation's begin record, and `ticks` the moment the trigger fired.
  abi::DurationFacts duration{};
};

// "none", "armed", "fired", "frozen" (what every tool and binding prints).
const char* trigger_state_name(abi::TriggerState state);
// "running", "exited", "crashed": the state the process left in its segment.
const char* process_state_name(abi::ProcessState state);

struct ProcessInfo {
  std::string path;  // segment path
  uint32_t pid = 0;
  uint32_t node = 0;        // index into Trace::nodes() (0 when the trace describes no node)
  uint32_t parent_pid = 0;  // when its segment was created (0 if unknown)
  bool alive = false;
  abi::ProcessState state = abi::ProcessState::kRunning;
  abi::Mode mode = abi::Mode::kOverwrite;
  abi::ClockKind clock = abi::ClockKind::kTsc;
  std::string process_name;
  std::string user_name;
  uint64_t ticks_per_second = 0;
  abi::ClockPair clock_start{};
  abi::ClockPair clock_latest{};
  uint32_t ring_size = 0;
  uint32_t block_size = 0;
  uint32_t max_threads = 0;
  uint64_t segment_size = 0;
  uint64_t lost_no_slot = 0;
  uint64_t lost_reclaimed = 0;
  uint32_t consumer_pid = 0;
  uint32_t crash_signal = 0;
  uint32_t crash_tid = 0;
  TriggerInfo trigger;
};

// The clock of a node's records (TSC ticks or CLOCK_MONOTONIC ns) read before and after
// CLOCK_REALTIME: realtime_ns was read between the two.
struct ClockReading {
  uint64_t ticks_before = 0;
  uint64_t realtime_ns = 0;
  uint64_t monotonic_ns = 0;
  uint64_t ticks_after = 0;
};

inline constexpr uint64_t kUnknownErrorBound = ~0ull;

// A machine whose processes a trace file holds (docs/format.md, "Nodes"): every snapshot and
// recording names its node; `nanotrace merge` makes a file of several.
struct NodeInfo {
  uint32_t index = 0;
  std::string hostname;
  std::string machine_id;  // /etc/machine-id
  std::string boot_id;     // the kernel's boot id: nodes that share it share one clock
  abi::ClockKind clock = abi::ClockKind::kTsc;
  uint64_t ticks_per_second = 0;
  std::vector<ClockReading> clock_pairs;  // taken when the snapshot or recording ended
  // Clock sync as its daemon saw it: "chrony", "ptp4l" or "unknown".
  std::string sync_source = "unknown";
  bool synchronised = false;
  int64_t sync_offset_ns = 0;  // chrony: system time offset; ptp4l: offset from the master
  uint64_t sync_root_delay_ns = 0;
  uint64_t sync_root_dispersion_ns = 0;
  uint64_t sync_bound_ns = kUnknownErrorBound;  // its clock's error against true time
  std::string sync_reference;
  // How its times were put on the trace's timeline: "own" (a node's own file), "reference"
  // (the node the others were aligned to), "shared-clock" (the reference's machine and boot:
  // exact), "realtime" (through the clock pairs and CLOCK_REALTIME: within error_bound_ns).
  std::string alignment = "own";
  uint64_t error_bound_ns = 0;  // kUnknownErrorBound: unknown
  uint32_t first_process = 0;   // index into Trace::processes()
  uint32_t process_count = 0;
  // The trigger of one of its processes that fired (the freeze's origin), if any.
  bool has_origin = false;
  uint32_t origin_process = 0;  // index into Trace::processes()
  uint32_t origin_pid = 0;
  uint32_t origin_tid = 0;
  uint32_t origin_slot = 0;
  uint64_t origin_seq = 0;
  uint64_t origin_ticks = 0;  // on the trace's clock (Trace::ticks_to_ns)
  std::string origin_event;   // "group:event"
};

struct Record {
  uint64_t ticks = 0;    // clock value (TSC ticks or ns, see ProcessInfo::clock)
  uint64_t time_ns = 0;  // nanoseconds since the segment was created
  uint64_t seq = 0;      // per-thread record number, from 0
  uint32_t thread = 0;   // index into the reader's thread list (ThreadStats)
  uint32_t pid = 0;      // the process that wrote it
  const EventInfo* event = nullptr;
  uint32_t cpu = 0;   // kernel records (event->is_kernel): the CPU that logged it
  uint32_t task = 0;  // kernel records: the thread it ran in (0: idle or interrupt)
  uint32_t field_count = 0;
  FieldValue values[abi::kMaxFields];
};

// What one thread's stream delivered and lost.
struct ThreadStats {
  ThreadInfo info;
  uint64_t records = 0;      // records returned
  uint64_t overwritten = 0;  // records lost to overwrite before they could be read
  uint64_t dropped = 0;      // records the writer dropped (from ThreadSlot::dropped)
  uint64_t corrupt_blocks = 0;
  // Records a corrupt block made unreadable: a trace file's stream ends at a DATA chunk that
  // fails its checks, and the records from there to the writer's count (its LOSS chunk) are
  // lost with it. (A block that fails within a chunk becomes a sequence gap: overwritten.)
  uint64_t unreadable = 0;
  uint64_t lost() const { return overwritten + dropped + unreadable; }
};

// Consecutive records of one thread, still in the raw encoding of docs/format.md
// ("Rings, blocks and records"): each record is word0 (stamp48 << 16 | event id) then its
// payload. Every record in it was checked (known event id, string lengths, sizes), so a
// consumer that re-encodes raw records (the CTF exporter) may walk it without bound checks
// beyond `bytes`.
struct RecordSpan {
  const uint8_t* data = nullptr;  // the first record
  uint32_t bytes = 0;             // whole records only
  uint32_t records = 0;
  uint64_t base_ticks = 0;  // clock value the stamps are relative to (abi::expand_ticks)
  uint64_t first_seq = 0;   // per-thread sequence number of the first record
};

// One thread's records as spans, in order, with the same loss accounting as RecordSource.
class SpanSource {
 public:
  virtual ~SpanSource() = default;
  // Fills the next non-empty span; false at the end. The bytes stay valid until the next call.
  virtual bool next(RecordSpan* span) = 0;
  // What was read and lost so far (complete once next() returned false).
  virtual const ThreadStats& stats() const = 0;
};

class RecordSource;
namespace reader {
struct TraceFile;
struct TraceInternals;
class KernelTables;
}  // namespace reader

class Trace {
 public:
  // Attaches to /dev/shm/nanotrace-<pid>. writable: needed to enable groups or consume.
  static Result<std::unique_ptr<Trace>> open_pid(pid_t pid, bool writable = false);
  // Attaches to the live segment whose process chose this name (NANOTRACE_NAME).
  static Result<std::unique_ptr<Trace>> open_name(const std::string& name, bool writable = false);
  // Attaches to a segment by path (e.g. a segment left by a crashed process).
  static Result<std::unique_ptr<Trace>> open_path(const std::string& path, bool writable = false);
  // pid, "name:NAME", or a path: what the CLI accepts as a source. A path may name a
  // segment or a trace file (written by `nanotrace record`, `snapshot` or `recover`,
  // recognised by its magic); a trace file is read-only (writable is ignored) and its
  // process is reported as not alive. Errors: kNotFound, kCorrupt, kUnsupported, kIoError.
  static Result<std::unique_ptr<Trace>> open(const std::string& source, bool writable = false);

  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // Re-reads the header, event and group tables (events registered since open appear).
  Status refresh();
  // True if this Trace reads a trace file rather than a live segment.
  bool is_file() const { return file_ != nullptr; }
  // Why part of a trace file was ignored (a torn or damaged tail), or empty.
  const std::string& warning() const { return warning_; }
  // The process; for a trace file of several processes (`nanotrace run`), the first one.
  const ProcessInfo& process() const { return process_; }
  // Every process the trace holds, the first being process(). The events of all of them are
  // in events(): identical call sites share one event id.
  const std::vector<ProcessInfo>& processes() const { return processes_; }
  // The machines the processes ran on (ProcessInfo::node), in the trace's order: one in a
  // snapshot or recording, several in a file `nanotrace merge` wrote, none for a live
  // segment or a file written before nodes were recorded. Records of every node are on one
  // timeline (Record::ticks): each node's clock mapped as its NodeInfo::alignment says.
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  const std::vector<EventInfo>& events() const { return events_; }
  const EventInfo* event_by_id(uint16_t id) const;
  std::vector<GroupInfo> groups() const;
  std::vector<ThreadInfo> threads() const;  // slots that are not free

  // Enables or disables a group in the live process (REQUIRES: writable).
  Status set_group_enabled(const std::string& group, bool enabled);

  // Where every Record::time_ns counts from: a live segment's start; in a trace file the
  // earliest of the processes' segment starts and the first kernel event (`run --kernel`
  // starts the capture before the command), so that no record comes before it. Its ticks,
  // and CLOCK_REALTIME and CLOCK_MONOTONIC ns at that moment.
  const abi::ClockPair& time_origin() const { return origin_; }
  // Nanoseconds between the time origin and a clock value; wall-clock time of one.
  uint64_t ticks_to_ns(uint64_t ticks) const {  // inline: exporters call it per record
    uint64_t start = origin_.ticks;
    if (ticks <= start) return 0;
    return static_cast<uint64_t>(static_cast<double>(ticks - start) * ns_per_tick_);
  }
  uint64_t ticks_to_realtime_ns(uint64_t ticks) const;

  // Kernel events stored in a trace file recorded with `record --kernel` (EventInfo::is_kernel;
  // id = index here); empty for a segment or a file without them.
  const std::vector<EventInfo>& kernel_events() const;
  // The clock value when kernel capture began: earlier user records have no kernel events
  // (0 without kernel events).
  uint64_t kernel_start_ticks() const;
  // uname(2) of the machine that recorded the kernel events ("Linux", "6.1.0-18-amd64",
  // "#1 SMP ...", "x86_64"); empty strings without kernel events or in a file recorded before
  // it was stored.
  struct KernelSystem {
    std::string sysname, release, version, machine;
  };
  KernelSystem kernel_system() const;
  // read_all, with the kernel records of a trace file merged in by time (the same clock:
  // Record::ticks compare directly). A kernel record's Record::thread indexes one entry per
  // recorded CPU after the user-space threads (tid 0, name "cpuN", its losses: ftrace's
  // overruns and drops); Record::cpu and Record::task are set.
  std::unique_ptr<RecordSource> read_all_with_kernel();
  // The kernel records of one recorded CPU alone, in its order (for per-CPU outputs such as
  // CTF streams): index below kernel_cpu_count(), in the order read_all_with_kernel lists the
  // CPUs. Its threads() is that CPU's one entry (Record::thread 0). Opened one at a time, a
  // file with many CPUs holds one sub-buffer in memory, not one per CPU.
  uint32_t kernel_cpu_count() const;
  std::unique_ptr<RecordSource> read_kernel_cpu(uint32_t index);

  // Reads every thread's ring as it is now (records written before this call), merged by
  // time. consume: also advance the consumer positions (REQUIRES: writable and
  // attach_consumer()). From a trace file, read_all, read_all_with_kernel and read_spans
  // read each thread's next chunk ahead on one background thread per read, started with
  // the first chunk and ended with the read (a child forked meanwhile goes on without it).
  std::unique_ptr<RecordSource> read_all(bool consume = false);
  // The same records, not merged and not decoded: one SpanSource per entry of threads().
  std::vector<std::unique_ptr<SpanSource>> read_spans();

  // Registers this process as the segment's consumer (block mode waits for it). kBusy if
  // another live consumer is attached.
  Status attach_consumer();
  void detach_consumer();

  uint64_t size() const { return size_; }  // bytes mapped
  // The open segment or trace file the data comes from (outputs must not be that file).
  int source_fd() const;

 private:
  // The raw mapping, for this library's code on segment bytes (src/reader/trace_internals.hpp).
  friend struct reader::TraceInternals;
  const uint8_t* base() const { return base_; }
  uint8_t* writable_base() const { return writable_ ? base_ : nullptr; }
  int fd() const { return fd_; }  // the segment or trace file

  Trace() = default;
  Status map(const std::string& path, bool writable);
  Status open_file(const std::string& path);
  Status load_tables();
  void load_kernel_tables();
  void choose_time_origin();
  void compute_clock_scale();
  void load_nodes();

  std::string path_;
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool writable_ = false;
  bool consumer_ = false;
  Status load_other_processes();
  ProcessInfo process_;
  std::vector<ProcessInfo> processes_;
  std::vector<NodeInfo> nodes_;
  // Per process (as in processes_): its own event table, and its event ids in events_ (empty
  // when they are the same ids).
  std::vector<std::vector<EventInfo>> local_events_;
  std::vector<std::vector<uint16_t>> id_maps_;
  std::vector<EventInfo> events_;
  std::vector<std::string> group_names_;
  double ns_per_tick_ = 1.0;
  abi::ClockPair origin_{};                             // time_origin()
  std::shared_ptr<reader::TraceFile> file_;             // set when reading a trace file
  std::shared_ptr<const reader::KernelTables> kernel_;  // its kernel events, if any
  std::string warning_;
};

// A stream of records in time order (merged over threads), with loss accounting.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Fills the next record; false at the end. The record's strings and event pointer stay
  // valid until the next call.
  virtual bool next(Record* record) = 0;
  // The next record where the source holds it, for a consumer that reads each record once
  // (an exporter): no copy of its values. Null at the end. It stays valid, as next()'s
  // would, until the next call of either.
  virtual const Record* next_ref() = 0;
  // Per-thread statistics so far (complete once the end was reached).
  virtual const std::vector<ThreadStats>& threads() const = 0;
};

// A traced process found in /dev/shm.
struct ProcessEntry {
  ProcessInfo info;
  uint32_t threads = 0;
  uint64_t events = 0;          // records written, all threads
  uint64_t lost = 0;            // dropped + no slot + reclaimed (overwrite losses show when read)
  uint64_t resident_bytes = 0;  // memory the segment occupies in /dev/shm
  std::string error;            // non-empty if the segment could not be read
};
std::vector<ProcessEntry> list_processes();

// Text of a record's fields with the format's placeholders filled: "req=1 len=4096".
std::string format_fields(const Record& record);
// Field `i` of a record as it is shown: an enum value that has a name becomes that name (a
// string value); any other value is returned as it is. REQUIRES: i < record.field_count.
FieldValue named_value(const FieldInfo& field, const FieldValue& value);
inline FieldValue display_value(const Record& record, uint32_t i) {
  const FieldInfo& field = record.event->fields[i];
  return field.value_names.empty() ? record.values[i] : named_value(field, record.values[i]);
}
// One field as text (integers in decimal, pointers in hex, strings as is).
std::string format_value(const FieldValue& value);
const char* mode_name(abi::Mode mode);

}  // namespace nanotrace
