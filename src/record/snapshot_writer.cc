// Snapshot files (see snapshot_writer.hpp).
#include "record/snapshot_writer.hpp"

#include <algorithm>
#include <memory>

#include "record/drainer.hpp"
#include "record/file_writer.hpp"
#include "record/kernel_recording.hpp"
#include "record/node_clock.hpp"
#include "record/process_session.hpp"

namespace nanotrace {
namespace rec {
namespace {

// The flight capture's window from oldest_ticks on (0: no user record) into the file.
Status write_flight_window(kernel::KernelCapture& flight, uint64_t oldest_ticks, FileWriter& out,
                           RecordSummary* summary) {
  auto window = flight.read_window(oldest_ticks);
  if (!window.ok()) return window.status();
  summary->kernel_pages = window->pages;
  summary->kernel_lost = window->lost;
  return write_kernel_window(*window, out);
}

}  // namespace

Result<RecordSummary> write_snapshot_of(const std::vector<Trace*>& traces,
                                        const std::string& output, bool compress,
                                        kernel::KernelCapture* flight, const ClockSync* sync,
                                        const sys::NodeIdentity* node) {
  if (traces.empty()) return Status::Invalid("no process to snapshot");
  FileWriter out;
  const ProcessInfo& first = traces[0]->process();
  Status s = out.open(output, first.pid,
                      first.alive ? file::FileKind::kSnapshot : file::FileKind::kRecovered,
                      compress, traces.size() == 1 ? traces[0]->source_fd() : -1);
  if (!s.ok()) return s;
  uint64_t oldest = UINT64_MAX;
  RecordHook hook;
  if (flight != nullptr) {
    hook = [&](const Record& r, const StreamState&) {
      oldest = std::min(oldest, r.ticks);
      return false;
    };
  }
  RecordSummary summary;
  summary.reason = "complete";
  for (size_t i = 0; i < traces.size() && s.ok(); ++i) {
    Drainer drainer(*traces[i], out, /*consume=*/false);
    drainer.set_process_index(static_cast<uint32_t>(i));
    uint64_t moved = 0;
    bool stopped = false;
    s = drainer.write_meta(true);
    if (s.ok()) s = drainer.pass(hook, /*final=*/true, &moved, &stopped);
    if (s.ok()) s = drainer.write_loss();
    const uint32_t pid = traces[i]->process().pid;
    for (RecordedThread& t : summarize_streams(drainer.all_streams(), pid)) {
      summary.threads.push_back(std::move(t));
    }
    summary.records += drainer.records();
    summary.lost_no_slot += drainer.lost_no_slot();
    summary.lost_reclaimed += drainer.lost_reclaimed();
    if (traces.size() > 1) {
      RecordedProcess p;
      p.pid = pid;
      p.name = traces[i]->process().process_name;
      p.records = drainer.records();
      summary.processes.push_back(p);
    }
  }
  if (s.ok() && flight != nullptr) {
    s = write_flight_window(*flight, oldest == UINT64_MAX ? 0 : oldest, out, &summary);
  }
  if (s.ok()) {
    s = write_node_chunk(out, std::vector<const Trace*>(traces.begin(), traces.end()), sync, node);
  }
  if (s.ok()) s = write_end_chunk(out, summary.records, file::EndReason::kComplete);
  if (s.ok()) s = out.close();
  if (!s.ok()) return s;
  summary.file_bytes = out.bytes_written();
  summary.data_bytes = out.data_bytes();
  return summary;
}

}  // namespace rec

Result<RecordSummary> write_snapshot(Trace& trace, const std::string& output, bool compress) {
  return rec::write_snapshot_of({&trace}, output, compress, nullptr);
}

}  // namespace nanotrace
