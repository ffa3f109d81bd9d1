// Several processes into one trace file (see process_session.hpp).
#include "record/process_session.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "base/process.hpp"
#include "reader/trace_internals.hpp"
#include "record/node_clock.hpp"

namespace nanotrace::rec {
namespace {

bool writer_alive(const Trace& trace, const abi::SegmentHeader* header) {
  return __atomic_load_n(&header->state, __ATOMIC_ACQUIRE) ==
             static_cast<uint32_t>(abi::ProcessState::kRunning) &&
         sys::segment_byte_locked(reader::TraceInternals::fd(trace), sys::kWriterLockByte);
}

uint64_t lost_of(const Drainer& d) {
  uint64_t n = d.lost_no_slot() + d.lost_reclaimed();
  for (const StreamState& s : d.all_streams()) {
    n += s.overwritten + s.reclaimed +
         (s.dropped > s.dropped_at_start ? s.dropped - s.dropped_at_start : 0);
  }
  return n;
}

}  // namespace

std::vector<RecordedThread> summarize_streams(const std::vector<StreamState>& streams,
                                              uint32_t pid) {
  std::vector<RecordedThread> out;
  for (const StreamState& s : streams) {
    RecordedThread t;
    t.pid = pid;
    t.slot = s.slot;
    t.generation = s.generation;
    t.tid = s.tid;
    t.name = s.name;
    t.records = s.records;
    t.overwritten = s.overwritten;
    t.dropped = s.dropped > s.dropped_at_start ? s.dropped - s.dropped_at_start : 0;
    t.reclaimed = s.reclaimed;
    t.corrupt_blocks = s.corrupt_blocks;
    out.push_back(std::move(t));
  }
  return out;
}

ProcessSession::~ProcessSession() = default;

Status ProcessSession::scan(uint64_t run_id) {
  for (const sys::SegmentName& name : sys::list_segment_names()) {
    struct stat st;
    if (stat(name.path.c_str(), &st) != 0) continue;
    std::pair<uint64_t, uint32_t> id{st.st_ino, name.pid};
    if (seen_.count(id)) continue;
    auto opened = Trace::open_path(name.path, /*writable=*/true);
    if (!opened.ok()) {
      // Being created (its version not written yet), or not ours to read: retried a while.
      if (++failures_[id] > 1000) seen_.insert(id);
      continue;
    }
    seen_.insert(id);
    auto* h = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(**opened));
    if (h->run_id != run_id || procs_.size() >= 0xffff) continue;
    std::vector<SlotAtAttach> at_attach = slots_at_attach(**opened);
    // Nobody else consumes a session's segments; if someone does, read without consuming.
    const bool attached = (*opened)->attach_consumer().ok();
    Status s = add(std::move(opened.value()), std::move(at_attach), attached, true, st.st_ino);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status ProcessSession::add(std::unique_ptr<Trace> trace, std::vector<SlotAtAttach> at_attach,
                           bool attached, bool owned, ino_t inode) {
  if (procs_.size() >= 0xffff) return Status::Invalid("more than 65535 processes in one file");
  Recorded r;
  r.header = reinterpret_cast<const abi::SegmentHeader*>(reader::TraceInternals::base(*trace));
  r.inode = inode;
  r.owned = owned;
  const ProcessInfo& p = trace->process();
  r.info.pid = p.pid;
  r.info.parent_pid = r.header->parent_pid;
  r.info.name = p.process_name;
  r.trace = std::move(trace);
  r.drainer = std::make_unique<Drainer>(*r.trace, out_, attached, std::move(at_attach));
  r.drainer->set_process_index(static_cast<uint32_t>(procs_.size()));
  Status s = r.drainer->write_meta(true);
  if (!s.ok()) return s;
  procs_.push_back(std::move(r));
  return Status::Ok();
}

Status ProcessSession::pass(bool final, uint64_t* moved, bool* stopped) {
  *moved = 0;
  if (stopped) *stopped = false;
  for (size_t i = 0; i < procs_.size(); ++i) {
    Recorded& r = procs_[i];
    if (r.finished) continue;
    RecordHook hook;
    if (hook_) {
      hook = [this, i](const Record& rec, const StreamState& st) { return hook_(i, rec, st); };
    }
    const bool ended = final || !writer_alive(*r.trace, r.header);
    uint64_t m = 0;
    bool stop = false;
    Status s = r.drainer->pass(hook, ended, &m, &stop);
    if (!s.ok()) return s;
    *moved += m;
    if (stop) {
      if (stopped) *stopped = true;
      return Status::Ok();
    }
    if (!ended) continue;
    // Take what the ring still holds (a dead writer's tail, or the last records), and account
    // for every record so the counts and the consumer position are exact.
    for (int k = 0; k < 1000 && m != 0; ++k) {
      s = r.drainer->pass(hook, true, &m, &stop);
      if (!s.ok()) return s;
      if (stop) {
        if (stopped) *stopped = true;
        return Status::Ok();
      }
    }
    s = finish(r);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status ProcessSession::finish(Recorded& r) {
  Status s = r.drainer->write_meta(true);  // the final clock calibration
  if (s.ok()) s = r.drainer->write_loss();
  if (!s.ok()) return s;
  r.info.records = r.drainer->records();
  r.info.lost = lost_of(*r.drainer);
  r.trace->detach_consumer();
  if (r.owned && !writer_alive(*r.trace, r.header)) remove_segment(r);
  r.finished = true;
  return Status::Ok();
}

Status ProcessSession::finish_all() {
  for (Recorded& r : procs_) {
    if (r.finished) continue;
    Status s = finish(r);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status ProcessSession::write_loss() {
  for (Recorded& r : procs_) {
    if (r.finished) continue;
    Status s = r.drainer->write_loss();
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status ProcessSession::write_end(file::EndReason reason) {
  std::vector<const Trace*> traces;  // process index = order of adding
  for (const Recorded& r : procs_) traces.push_back(r.trace.get());
  if (Status s = write_node_chunk(out_, traces); !s.ok()) return s;
  file::EndPayload e{};
  e.chunks = out_.chunks();
  e.data_bytes = out_.data_bytes();
  e.records = records();
  e.reason = static_cast<uint32_t>(reason);
  return out_.write_chunk(file::ChunkType::kEnd, &e, sizeof(e));
}

// The segment is ours to remove (the session asked its processes to keep it), wherever it is
// now: an exec'd image's segment was renamed aside, and its old name may already be the new
// image's.
void ProcessSession::remove_segment(const Recorded& r) {
  for (const sys::SegmentName& name : sys::list_segment_names()) {
    struct stat st;
    if (stat(name.path.c_str(), &st) == 0 && st.st_ino == r.inode) {
      ::unlink(name.path.c_str());
      seen_.erase({r.inode, name.pid});
      return;
    }
  }
}

double ProcessSession::quarter_ring_s(double interval) const {
  double wait = 0.01;
  for (const Recorded& r : procs_) {
    if (r.finished || r.drainer->max_stream_moved() == 0) continue;
    double w = static_cast<double>(r.drainer->ring_size()) / 4 * interval /
               static_cast<double>(r.drainer->max_stream_moved());
    if (w < wait) wait = w;
  }
  return wait;
}

bool ProcessSession::writer_waiting() const {
  for (const Recorded& r : procs_) {
    if (!r.finished && r.drainer->writer_waiting()) return true;
  }
  return false;
}

bool ProcessSession::all_finished() const {
  for (const Recorded& r : procs_) {
    if (!r.finished) return false;
  }
  return true;
}

std::vector<RecordedProcess> ProcessSession::processes() const {
  std::vector<RecordedProcess> out;
  for (const Recorded& r : procs_) {
    out.push_back(r.info);
    if (!r.finished) {
      out.back().records = r.drainer->records();
      out.back().lost = lost_of(*r.drainer);
    }
  }
  return out;
}

std::vector<RecordedThread> ProcessSession::threads() const {
  std::vector<RecordedThread> out;
  for (const Recorded& r : procs_) {
    for (RecordedThread& t : summarize_streams(r.drainer->all_streams(), r.info.pid)) {
      out.push_back(std::move(t));
    }
  }
  return out;
}

uint64_t ProcessSession::records() const {
  uint64_t n = 0;
  for (const Recorded& r : procs_) n += r.drainer->records();
  return n;
}

uint64_t ProcessSession::lost_no_slot() const {
  uint64_t n = 0;
  for (const Recorded& r : procs_) n += r.drainer->lost_no_slot();
  return n;
}

uint64_t ProcessSession::lost_reclaimed() const {
  uint64_t n = 0;
  for (const Recorded& r : procs_) n += r.drainer->lost_reclaimed();
  return n;
}

}  // namespace nanotrace::rec
