// Attaching to a live segment: mapping it, validating every header field, offset and count
// before use, and decoding the event, group and thread tables into owned values.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "base/clock.hpp"
#include "base/kernel_meta.hpp"
#include "base/process.hpp"
#include "nanotrace/reader.hpp"
#include "reader/field_names.hpp"
#include "reader/kernel_tables.hpp"
#include "reader/segment_checks.hpp"
#include "reader/source_check.hpp"
#include "reader/trace_file.hpp"
#include "reader/trace_internals.hpp"

namespace nanotrace {
namespace {

std::string bounded(const char* p, size_t cap) { return std::string(p, ::strnlen(p, cap)); }

}  // namespace

Trace::~Trace() {
  if (consumer_) detach_consumer();
  if (base_ && !file_) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

Status Trace::map(const std::string& path, bool writable) {
  path_ = path;
  writable_ = writable;
  fd_ = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
  if (fd_ < 0) {
    if (errno == ENOENT) return Status::NotFound("no nanotrace segment at " + path);
    return Status::FromErrno(path, errno);
  }
  struct stat st;
  if (fstat(fd_, &st) != 0) return Status::FromErrno(path, errno);
  if (!S_ISREG(st.st_mode)) return Status::Invalid(path + " is not a regular file");
  if (!reader::wait_while_created(fd_, &st)) return Status::FromErrno(path, errno);
  if (st.st_uid != geteuid() && geteuid() != 0) {
    return Status::Invalid(path + " belongs to another user");
  }
  if (static_cast<uint64_t>(st.st_size) < sizeof(abi::SegmentHeader)) {
    return Status::Corrupt(path + ": truncated segment (" + std::to_string(st.st_size) + " bytes)");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  void* p = mmap(nullptr, size_, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return Status::FromErrno("mmap " + path, errno);
  base_ = static_cast<uint8_t*>(p);
  return load_tables();
}

namespace {

// What a segment header says of its process (not whether it is alive, nor its latest clock
// pair, nor its losses in a trace file).
void describe_process(const abi::SegmentHeader& h, ProcessInfo* p) {
  p->pid = h.pid;
  p->parent_pid = h.parent_pid;
  p->state = h.state <= 2 ? static_cast<abi::ProcessState>(h.state) : abi::ProcessState::kRunning;
  p->mode = static_cast<abi::Mode>(h.mode);
  p->clock = static_cast<abi::ClockKind>(h.clock_kind);
  p->process_name = bounded(h.process_name, sizeof(h.process_name));
  p->user_name = bounded(h.user_name, sizeof(h.user_name));
  p->ticks_per_second = h.ticks_per_second;
  p->clock_start = h.clock_start;
  p->ring_size = h.ring_size;
  p->block_size = h.block_size;
  p->max_threads = h.max_threads;
  p->segment_size = h.segment_size;
  p->lost_no_slot = h.lost_no_slot;
  p->lost_reclaimed = h.lost_reclaimed;
  p->consumer_pid = h.consumer_pid;
  p->crash_signal = h.crash_signal;
  p->crash_tid = h.crash_tid;
  p->trigger = reader::trigger_info(h);
}

// The live header's clock_latest, guarded by a seqlock: the start pair if it keeps moving, or
// if it is not past the start pair (h: the checked copy of the header).
abi::ClockPair latest_clock_pair(const uint8_t* base, const abi::SegmentHeader& h) {
  for (int i = 0; i < 100; ++i) {
    auto* live = reinterpret_cast<const abi::SegmentHeader*>(base);
    uint32_t a = __atomic_load_n(&live->clock_seq, __ATOMIC_ACQUIRE);
    abi::ClockPair pair = live->clock_latest;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if ((a & 1) == 0 && __atomic_load_n(&live->clock_seq, __ATOMIC_RELAXED) == a) {
      if (pair.monotonic_ns > h.clock_start.monotonic_ns && pair.ticks > h.clock_start.ticks) {
        return pair;
      }
      break;
    }
  }
  return h.clock_start;
}

// The group names of the group table.
std::vector<std::string> read_group_names(const uint8_t* base, const abi::SegmentHeader& h) {
  std::vector<std::string> names;
  auto* groups = reinterpret_cast<const abi::GroupEntry*>(base + h.groups_offset);
  for (uint32_t g = 0; g < h.groups_count; ++g) {
    names.push_back(bounded(groups[g].name, sizeof(groups[g].name)));
  }
  return names;
}

// The event table, each entry checked (group, field count and types). Errors: kCorrupt,
// naming the event.
Status read_event_table(const uint8_t* base, const abi::SegmentHeader& h,
                        const std::vector<std::string>& group_names, const std::string& path,
                        std::vector<EventInfo>* events) {
  const char* pool = reinterpret_cast<const char*>(base + h.strings_offset);
  auto str = [&](uint32_t off) -> std::string {
    if (off >= h.strings_used) return std::string();
    return bounded(pool + off, h.strings_used - off);
  };
  events->clear();
  auto* entries = reinterpret_cast<const abi::EventEntry*>(base + h.events_offset);
  for (uint32_t i = 0; i < h.events_count; ++i) {
    abi::EventEntry e;
    std::memcpy(&e, &entries[i], sizeof(e));
    if (e.group >= h.groups_count || e.field_count > abi::kMaxFields) {
      return Status::Corrupt(path + ": event " + std::to_string(i + 1) + " is malformed");
    }
    EventInfo info;
    info.id = static_cast<uint16_t>(i + 1);
    info.group_index = e.group;
    info.group = group_names[e.group];
    info.name = str(e.name);
    info.format = str(e.format);
    info.file = str(e.file);
    info.line = e.line;
    info.is_guard = e.reserved[0] != 0;
    for (uint32_t f = 0; f < e.field_count; ++f) {
      if (e.field_types[f] == 0 ||
          e.field_types[f] > static_cast<uint8_t>(abi::FieldType::kPointer)) {
        return Status::Corrupt(path + ": event " + info.full_name() + " has a bad field type");
      }
      info.fields.push_back(
          reader::field_info(str(e.field_names[f]), static_cast<abi::FieldType>(e.field_types[f])));
    }
    if (!info.is_guard) {
      info.layout =
          abi::RecordLayout(reinterpret_cast<const abi::FieldType*>(e.field_types), e.field_count);
    }
    events->push_back(std::move(info));
  }
  return Status::Ok();
}

}  // namespace

Status Trace::load_tables() {
  abi::SegmentHeader h;
  std::memcpy(&h, base_, sizeof(h));  // validate a private copy, not the live bytes
  Status s = reader::validate_header(h, size_, file_ != nullptr);
  if (!s.ok()) return Status(s.code(), path_ + ": " + s.message());
  if (file_ && h.block_size > file::kMaxBlockBytes)
    return Status::Corrupt(path_ + ": bad block size");
  ProcessInfo& p = process_;
  p.path = path_;
  describe_process(h, &p);
  // The process holds the writer lock while it runs in the image that created the segment;
  // the kernel drops it when the process dies or execs.
  p.alive = !file_ && sys::segment_byte_locked(fd_, sys::kWriterLockByte) &&
            h.state == static_cast<uint32_t>(abi::ProcessState::kRunning);
  p.clock_latest = latest_clock_pair(base_, h);
  if (file_) {
    p.lost_no_slot = file_->lost_no_slot;
    p.lost_reclaimed = file_->lost_reclaimed;
  }
  compute_clock_scale();
  origin_ = p.clock_start;  // a file's is chosen once every part is loaded
  group_names_ = read_group_names(base_, h);
  s = read_event_table(base_, h, group_names_, path_, &events_);
  if (!s.ok()) return s;
  if (!file_) processes_ = {process_};
  return Status::Ok();
}

namespace {

// What makes two call sites the same event in a file of several processes.
std::string event_key(const EventInfo& e) {
  std::string key = e.group + '\0' + e.name + '\0' + e.format + '\0' + e.file + '\0' +
                    std::to_string(e.line) + (e.is_guard ? "g" : "e");
  for (const FieldInfo& f : e.fields) {
    key += '\0' + f.name + static_cast<char>(f.type);
    for (const ValueName& v : f.value_names) key += std::to_string(v.value) + '=' + v.name + ',';
  }
  return key;
}

}  // namespace

Status Trace::load_other_processes() {
  processes_ = {process_};
  local_events_ = {events_};
  id_maps_ = {{}};
  std::map<std::string, uint16_t> known;
  for (const EventInfo& e : events_) known.emplace(event_key(e), e.id);
  for (size_t i = 1; i < file_->processes.size(); ++i) {
    // Each process's tables are read and checked like the first one's.
    Trace other;
    other.file_ = file_;
    other.path_ = path_;
    other.base_ = file_->processes[i].meta.data();
    other.size_ = file_->processes[i].meta.size();
    Status s = other.load_tables();
    if (!s.ok()) return s;
    other.process_.lost_no_slot = file_->processes[i].lost_no_slot;
    other.process_.lost_reclaimed = file_->processes[i].lost_reclaimed;
    other.base_ = nullptr;  // not owned
    std::vector<uint16_t> map(other.events_.size() + 1, 0);
    bool same = true;
    for (EventInfo& e : other.events_) {
      auto [it, added] = known.emplace(event_key(e), 0);
      if (added) {
        if (events_.size() >= 0xfffe) return Status::Unsupported(path_ + ": too many events");
        EventInfo global = e;
        global.id = static_cast<uint16_t>(events_.size() + 1);
        uint32_t g = 0;
        while (g < group_names_.size() && group_names_[g] != e.group) ++g;
        if (g == group_names_.size()) group_names_.push_back(e.group);
        global.group_index = g;
        events_.push_back(std::move(global));
        it->second = events_.back().id;
      }
      map[e.id] = it->second;
      same = same && it->second == e.id;
    }
    processes_.push_back(other.process_);
    local_events_.push_back(std::move(other.events_));
    id_maps_.push_back(same ? std::vector<uint16_t>() : std::move(map));
  }
  return Status::Ok();
}

Status Trace::refresh() {
  Status s = load_tables();
  if (s.ok() && file_) choose_time_origin();
  return s;
}

Status Trace::open_file(const std::string& path) {
  auto f = reader::TraceFile::open(path);
  if (!f.ok()) return f.status();
  file_ = std::move(f.value());
  path_ = path;
  warning_ = file_->warning;
  base_ = file_->meta.data();
  size_ = file_->meta.size();
  if (Status s = load_tables(); !s.ok()) return s;
  if (Status s = load_other_processes(); !s.ok()) return s;
  load_nodes();
  load_kernel_tables();
  choose_time_origin();
  return Status::Ok();
}

void Trace::choose_time_origin() {
  // The first kernel event is the first of some CPU's (each CPU's are in time order). A
  // stamp more than an hour before the first segment's start is damage, not an early event:
  // it does not move the origin (its time_ns is 0).
  constexpr double kMaxLeadNs = 3600e9;
  const abi::ClockPair& start = process_.clock_start;
  uint64_t earliest = start.ticks;
  auto consider = [&](uint64_t ticks) {
    if (ticks < earliest && static_cast<double>(start.ticks - ticks) * ns_per_tick_ <= kMaxLeadNs) {
      earliest = ticks;
    }
  };
  for (const ProcessInfo& p : processes_) consider(p.clock_start.ticks);
  for (uint32_t c = 0; c < kernel_cpu_count(); ++c) {
    Record r;
    if (read_kernel_cpu(c)->next(&r)) consider(r.ticks);
  }
  const uint64_t lead_ns =
      static_cast<uint64_t>(static_cast<double>(start.ticks - earliest) * ns_per_tick_);
  origin_.ticks = earliest;
  origin_.monotonic_ns = start.monotonic_ns - std::min(lead_ns, start.monotonic_ns);
  origin_.realtime_ns = start.realtime_ns - std::min(lead_ns, start.realtime_ns);
}

void Trace::load_kernel_tables() {
  std::string why = file_->kernel_warning;
  auto note = [&](const std::string& w) { why += (why.empty() ? "" : "; ") + w; };
  std::vector<reader::KernelTables::NodeMeta> metas;
  for (const reader::KernelNode& k : file_->kernel_nodes) {
    const std::string which = k.node == 0 ? "" : " (node " + std::to_string(k.node) + ")";
    // A node index must name one of the file's nodes (a file without NODE chunks is one).
    if (k.node >= std::max<size_t>(nodes_.size(), 1)) {
      note("kernel events of an unknown node " + std::to_string(k.node) + ": ignored");
      continue;
    }
    auto meta = file::decode_kernel_meta(k.meta.data(), k.meta.size());
    const abi::ClockKind clock = k.node < nodes_.size() ? nodes_[k.node].clock : process_.clock;
    if (!meta.ok()) {
      note(meta.status().message() + which);
    } else if ((meta->clock == file::KernelClock::kTsc) != (clock == abi::ClockKind::kTsc)) {
      note("kernel events use another clock than the process's records: ignored" + which);
    } else {
      metas.push_back({k.node, std::move(*meta)});
    }
  }
  if (!metas.empty()) {
    std::string left_out;
    auto tables = reader::KernelTables::build(std::move(metas), &left_out);
    if (!left_out.empty()) note(left_out);
    if (tables.ok()) kernel_ = std::move(*tables);
  }
  // The CPUs of nodes without tables are not read.
  std::erase_if(file_->kernel_data, [&](const reader::KernelCpuExtents& c) {
    return kernel_ == nullptr || kernel_->index_of(c.node) < 0;
  });
  if (!why.empty()) warning_ += (warning_.empty() ? "" : "; ") + path_ + ": " + why;
}

uint64_t Trace::kernel_start_ticks() const {
  // The latest node's: before it, some node's kernel events are missing.
  uint64_t latest = 0;
  for (size_t k = 0; kernel_ && k < kernel_->node_count(); ++k) {
    uint64_t start = kernel_->meta(k).start_ticks;
    const uint32_t node = kernel_->node(k);
    if (node < file_->nodes.size()) {
      const file::NodePayload* a =
          reader::TraceInternals::clock_alignment(*this, file_->nodes[node].first_process);
      if (a != nullptr) start = file::align_ticks(*a, start);
    }
    latest = std::max(latest, start);
  }
  return latest;
}

Trace::KernelSystem Trace::kernel_system() const {
  if (!kernel_) return {};
  const file::KernelUname& u = kernel_->meta(0).uname;
  return {u.sysname, u.release, u.version, u.machine};
}

const std::vector<EventInfo>& Trace::kernel_events() const {
  static const std::vector<EventInfo> kNone;
  return kernel_ ? kernel_->events() : kNone;
}

Result<std::unique_ptr<Trace>> Trace::open_path(const std::string& path, bool writable) {
  if (Status s = reader::check_source_path(path); !s.ok()) return s;
  std::unique_ptr<Trace> t(new Trace());
  if (reader::TraceFile::has_magic(path)) {
    Status s = t->open_file(path);
    if (!s.ok()) return s;
    return t;
  }
  Status s = t->map(path, writable);
  if (!s.ok()) return s;
  return t;
}

Result<std::unique_ptr<Trace>> Trace::open_pid(pid_t pid, bool writable) {
  if (pid <= 0) return Status::Invalid("bad pid " + std::to_string(pid));
  auto t = open_path("/dev/shm/nanotrace-" + std::to_string(pid), writable);
  if (t.ok() && (*t)->process().alive) return t;
  // The process may have had to use another name (nanotrace-<pid>.<n>: the usual one was
  // taken by someone else): prefer its live segment, else what it left behind.
  for (const sys::SegmentName& n : sys::list_segment_names()) {
    if (n.pid != static_cast<uint32_t>(pid) ||
        n.path == "/dev/shm/nanotrace-" + std::to_string(pid)) {
      continue;
    }
    auto other = open_path(n.path, writable);
    if (other.ok() && (*other)->process().alive &&
        (*other)->process().pid == static_cast<uint32_t>(pid)) {
      return other;
    }
  }
  if (!t.ok() && t.status().code() == StatusCode::kNotFound) {
    bool exists = kill(pid, 0) == 0 || errno == EPERM;
    return Status::NotFound(exists ? "process " + std::to_string(pid) + " is not traced"
                                   : "no process " + std::to_string(pid) +
                                         " and no segment it left behind");
  }
  return t;
}

Result<std::unique_ptr<Trace>> Trace::open_name(const std::string& name, bool writable) {
  for (const ProcessEntry& e : list_processes()) {
    if (e.error.empty() && e.info.user_name == name && e.info.alive) {
      return open_path(e.info.path, writable);
    }
  }
  return Status::NotFound("no live traced process named '" + name + "'");
}

Result<std::unique_ptr<Trace>> Trace::open(const std::string& source, bool writable) {
  if (source.rfind("name:", 0) == 0) return open_name(source.substr(5), writable);
  if (!source.empty() && source.find_first_not_of("0123456789") == std::string::npos) {
    if (source.size() > 9) return Status::Invalid("bad pid " + source);
    return open_pid(static_cast<pid_t>(std::stol(source)), writable);
  }
  struct stat st;
  if (source.find('/') != std::string::npos || stat(source.c_str(), &st) == 0) {
    return open_path(source, writable);
  }
  return open_name(source, writable);
}

const EventInfo* Trace::event_by_id(uint16_t id) const {
  if (id == 0 || id > events_.size()) return nullptr;
  return &events_[id - 1];
}

std::vector<GroupInfo> Trace::groups() const {
  auto* h = reinterpret_cast<const abi::SegmentHeader*>(base_);
  std::vector<GroupInfo> out;
  auto* groups = reinterpret_cast<const abi::GroupEntry*>(base_ + h->groups_offset);
  for (uint32_t g = 0; g < group_names_.size(); ++g) {
    out.push_back({group_names_[g], __atomic_load_n(&groups[g].enabled, __ATOMIC_RELAXED) != 0});
  }
  return out;
}

std::vector<ThreadInfo> Trace::threads() const {
  auto* h = reinterpret_cast<const abi::SegmentHeader*>(base_);
  std::vector<ThreadInfo> out;
  if (file_) {
    for (const reader::FileStream& fs : file_->streams) {
      const file::ThreadPayload& tp = fs.thread;
      ThreadInfo t;
      t.process = fs.process;
      t.pid = fs.process < processes_.size() ? processes_[fs.process].pid : process_.pid;
      t.slot = tp.slot & 0xffff;
      t.generation = tp.generation;
      t.tid = tp.tid;
      t.name = bounded(tp.name, sizeof(tp.name));
      uint32_t state = fs.has_loss ? fs.loss.state : tp.state;
      t.state = state <= 2 ? static_cast<abi::SlotState>(state) : abi::SlotState::kExited;
      t.head = fs.end;
      t.written = fs.has_loss ? fs.loss.written : 0;
      t.dropped = fs.has_loss && fs.loss.dropped > tp.dropped_at_start
                      ? fs.loss.dropped - tp.dropped_at_start
                      : 0;
      t.consumed_records = tp.first_seq;
      out.push_back(std::move(t));
    }
    return out;
  }
  auto* slots = reinterpret_cast<const abi::ThreadSlot*>(base_ + h->threads_offset);
  for (uint32_t i = 0; i < process_.max_threads; ++i) {
    const abi::ThreadSlot& s = slots[i];
    uint32_t state = __atomic_load_n(&s.state, __ATOMIC_ACQUIRE);
    if (state == static_cast<uint32_t>(abi::SlotState::kFree) || state > 2) continue;
    ThreadInfo t;
    t.pid = process_.pid;
    t.slot = i;
    t.generation = __atomic_load_n(&s.generation, __ATOMIC_ACQUIRE);
    t.state = static_cast<abi::SlotState>(state);
    t.tid = s.tid;
    t.name = bounded(s.name, sizeof(s.name));
    // Head, then the counters: the records up to head are then counted in `written`, but
    // for the one the writer may be between publishing and counting.
    t.head = __atomic_load_n(&s.head, __ATOMIC_ACQUIRE);
    t.written = __atomic_load_n(&s.written, __ATOMIC_ACQUIRE);
    t.dropped = __atomic_load_n(&s.dropped, __ATOMIC_ACQUIRE);
    t.consumed_records = s.consumed_records;
    out.push_back(std::move(t));
  }
  return out;
}

Status Trace::set_group_enabled(const std::string& group, bool enabled) {
  if (file_) return Status::Invalid(path_ + " is a trace file, not a live process");
  if (!writable_) return Status::Invalid("segment opened read-only");
  auto* h = reinterpret_cast<abi::SegmentHeader*>(base_);
  auto* groups = reinterpret_cast<abi::GroupEntry*>(base_ + h->groups_offset);
  for (uint32_t g = 0; g < group_names_.size(); ++g) {
    if (group_names_[g] == group) {
      __atomic_store_n(&groups[g].enabled, enabled ? 1 : 0, __ATOMIC_RELEASE);
      __atomic_fetch_add(&h->control_seq, 1, __ATOMIC_RELEASE);
      reader::futex_wake_all(&h->control_seq);
      return Status::Ok();
    }
  }
  std::string known;
  for (const auto& n : group_names_) known += (known.empty() ? "" : ", ") + n;
  return Status::NotFound("no group '" + group + "' in process " + std::to_string(process_.pid) +
                          " (groups: " + known + ")");
}

void Trace::compute_clock_scale() {
  const abi::ClockPair& a = process_.clock_start;
  const abi::ClockPair& b = process_.clock_latest;
  if (process_.clock == abi::ClockKind::kMonotonic) {
    ns_per_tick_ = 1.0;
    return;
  }
  // The longest baseline the process recorded gives the best rate (1e-4 or better from
  // 1 ms on, the pairs being bracketed to tens of nanoseconds). Every record of a process
  // that exited (its last pair taken at exit), or of a trace file, lies between the start
  // pair and the latest one: interpolating between the two is as exact as the pairs
  // however short the baseline, and every reader finds the same times.
  double hz = static_cast<double>(process_.ticks_per_second);
  const bool bracketed = b.monotonic_ns > a.monotonic_ns && b.ticks > a.ticks;
  const bool ended = file_ || process_.state == abi::ProcessState::kExited;
  if (bracketed && (ended || b.monotonic_ns > a.monotonic_ns + 1000000)) {
    hz = static_cast<double>(b.ticks - a.ticks) * 1e9 /
         static_cast<double>(b.monotonic_ns - a.monotonic_ns);
  } else if (!file_) {
    // A live process too young to have measured its rate: the time stamp counter is the
    // machine's, so a pair taken here, 1 ms or more after the start pair, measures it. The
    // pair bracketed most tightly of several: a first clock_gettime in a process can take
    // microseconds (the vDSO's pages faulted in), which moved times by 0.04 %.
    abi::ClockPair now{};
    uint64_t best_span = ~uint64_t{0};
    for (int taken = 0; taken < 8;) {
      unsigned aux;
      uint64_t t0 = __rdtscp(&aux);
      const uint64_t mono = sys::monotonic_ns();
      uint64_t t1 = __rdtscp(&aux);
      if (mono < a.monotonic_ns + 1000000) continue;  // too close to the start pair yet
      ++taken;
      if (t1 - t0 >= best_span) continue;
      best_span = t1 - t0;
      now = {t0 + (t1 - t0) / 2, 0, mono};
    }
    if (now.ticks > a.ticks) {
      hz = static_cast<double>(now.ticks - a.ticks) * 1e9 /
           static_cast<double>(now.monotonic_ns - a.monotonic_ns);
    }
  }
  if (!(hz > 1e6)) hz = 1e9;  // no usable rate (a damaged header): show ticks as ns
  ns_per_tick_ = 1e9 / hz;
}

uint64_t Trace::ticks_to_realtime_ns(uint64_t ticks) const {
  return origin_.realtime_ns + ticks_to_ns(ticks);
}

Status Trace::attach_consumer() {
  if (file_) return Status::Invalid(path_ + " is a trace file, not a live process");
  if (!writable_) return Status::Invalid("segment opened read-only");
  auto* h = reinterpret_cast<abi::SegmentHeader*>(base_);
  // The consumer lock is what the writers trust: the kernel drops it when this process dies
  // (even as an unreaped zombie), so a dead consumer never blocks a writer or a successor.
  if (!sys::lock_segment_byte(fd_, sys::kConsumerLockByte)) {
    uint32_t cur = __atomic_load_n(&h->consumer_pid, __ATOMIC_ACQUIRE);
    return Status::Busy("process " + std::to_string(process_.pid) + " already has a consumer" +
                        (cur != 0 ? " (pid " + std::to_string(cur) + ")" : std::string()));
  }
  __atomic_store_n(&h->consumer_pid, static_cast<uint32_t>(getpid()), __ATOMIC_RELEASE);
  consumer_ = true;
  return Status::Ok();
}

void Trace::detach_consumer() {
  if (!consumer_ || !base_) return;
  auto* h = reinterpret_cast<abi::SegmentHeader*>(base_);
  uint32_t me = static_cast<uint32_t>(getpid());
  __atomic_compare_exchange_n(&h->consumer_pid, &me, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  sys::unlock_segment_byte(fd_, sys::kConsumerLockByte);
  consumer_ = false;
}

}  // namespace nanotrace
