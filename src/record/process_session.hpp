// The processes one trace file records (docs/format.md: version 2, the process index in the
// high 16 bits of a chunk's slot; one process is index 0, the one-process file): one drainer
// per process, each finished on its own when its writer goes away while the others go on.
// The recording loop (recording_loop.hpp) drains a session; its source (drain_source.hpp)
// adds the processes. Internal header.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nanotrace/record.hpp"
#include "record/drainer.hpp"
#include "record/file_writer.hpp"

namespace nanotrace::rec {

// What each stream of a drainer contributed, as RecordSummary reports it.
std::vector<RecordedThread> summarize_streams(const std::vector<StreamState>& streams,
                                              uint32_t pid);
// The END chunk of a file: `records` in all (docs/format.md, "END").
Status write_end_chunk(FileWriter& out, uint64_t records, file::EndReason reason);

class ProcessSession {
 public:
  explicit ProcessSession(FileWriter& out) : out_(out) {}
  ~ProcessSession();
  ProcessSession(const ProcessSession&) = delete;
  ProcessSession& operator=(const ProcessSession&) = delete;

  // Opens and adds the segments in /dev/shm that appeared since the last scan and that
  // `wanted` takes (`nanotrace run`: those whose header carries its run id), attached as
  // their consumer where nobody else is. owned: as for add().
  using SegmentFilter = std::function<bool(const abi::SegmentHeader&)>;
  Status scan(const SegmentFilter& wanted, bool owned);
  // Adds a live process. at_attach: slots_at_attach() taken before attaching; attached: the
  // trace is its segment's consumer (else it is read without consuming). owned: the session
  // removes the segment once its process is gone and drained.
  Status add(std::unique_ptr<Trace> trace, std::vector<SlotAtAttach> at_attach, bool attached,
             bool owned, ino_t inode = 0);

  // Called for each record walked of process `index` (its order of adding); true stops the
  // pass right after it.
  using Hook = std::function<bool(size_t index, const Record&, const StreamState&)>;
  void set_hook(Hook hook) { hook_ = std::move(hook); }

  // One pass over every process still recorded; a process whose writer went away is drained
  // to the end and finished. final: the session ends (drain and finish everyone). *stopped:
  // the hook asked to stop (the pass ends there; call finish_all next).
  Status pass(bool final, uint64_t* moved, bool* stopped = nullptr);
  // Finishes every process still recorded without draining further (after a stop).
  Status finish_all();
  // LOSS chunks of every process still recorded (the writers' counters now).
  Status write_loss();
  // The END chunk: every record of every process.
  Status write_end(file::EndReason reason);

  // How long the busiest ring takes to fill a quarter of itself at the rate it filled in
  // the last pass (interval: seconds since the pass before), at most 10 ms.
  double quarter_ring_s(double interval) const;
  bool writer_waiting() const;
  bool all_finished() const;
  size_t size() const { return procs_.size(); }
  Trace& trace(size_t index) { return *procs_[index].trace; }
  const Trace& trace(size_t index) const { return *procs_[index].trace; }
  // Drained to its end (its writer went away, or the session was finished).
  bool finished(size_t index) const { return procs_[index].finished; }
  // A pidfd of each process not finished (it turns readable when the process exits), to end
  // a rest between passes early.
  std::vector<int> exit_fds() const;

  std::vector<RecordedProcess> processes() const;
  std::vector<RecordedThread> threads() const;
  uint64_t records() const;
  uint64_t lost_no_slot() const;
  uint64_t lost_reclaimed() const;

 private:
  struct Recorded {
    std::unique_ptr<Trace> trace;
    std::unique_ptr<Drainer> drainer;
    const abi::SegmentHeader* header = nullptr;
    ino_t inode = 0;
    int pidfd = -1;  // closed once finished
    bool owned = false;
    bool finished = false;
    RecordedProcess info;
  };
  // Drained to the end: final meta and losses, consumer detached, segment removed if owned.
  Status finish(Recorded& r);
  void remove_segment(const Recorded& r);

  FileWriter& out_;
  std::vector<Recorded> procs_;
  Hook hook_;
  // Segment files seen by scan: (inode, pid in the name). An inode is reused only once its
  // file is gone: a session's own are forgotten when it removes them, and another process's
  // file whose inode one of ours reuses has another pid in its name.
  std::set<std::pair<uint64_t, uint32_t>> seen_;
  std::map<std::pair<uint64_t, uint32_t>, int> failures_;
};

}  // namespace nanotrace::rec
