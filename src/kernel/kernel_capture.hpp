// Capturing kernel events for `nanotrace record --kernel`: our own tracefs instance with the
// selected events, on the clock of the traced process's records (x86-tsc for TSC ticks, mono
// for CLOCK_MONOTONIC nanoseconds: the same values, so nothing is converted), filtered to its
// threads where the event names a thread, and read per CPU as raw ring-buffer sub-buffers
// (trace_pipe_raw) that go to the trace file unchanged. The reader decodes them with the
// formats stored in the KERNEL_META chunk.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/kernel_meta.hpp"
#include "kernel/event_selection.hpp"
#include "kernel/ftrace_instance.hpp"
#include "nanotrace/status.hpp"

struct tracefs_cpu;

namespace nanotrace::kernel {

struct CaptureOptions {
  std::vector<std::string> groups;  // --kernel items
  uint32_t pid = 0;                 // the traced process (its threads filter some events)
  file::KernelClock clock = file::KernelClock::kTsc;
  uint32_t buffer_kb = 4096;  // per CPU
  // A flight capture (`record --snapshot-on`): its own instance (…-flight) in overwrite mode,
  // read only by read_window(), so that it holds the kernel's last buffer_kb per CPU.
  bool flight = false;
};

// What a flight capture's buffers held (read_window).
struct KernelWindow {
  file::KernelMeta meta;  // formats, start_ticks, and the losses since the previous window
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> cpus;  // CPU, whole sub-buffers
  uint64_t pages = 0;
  uint64_t lost = 0;  // events ftrace overwrote or dropped since the capture began
};

// Receives whole sub-buffers of one CPU: `bytes` is a multiple of the sub-buffer size;
// position is the CPU's byte count before them.
using PageSink =
    std::function<Status(uint32_t cpu, uint64_t position, const uint8_t* pages, size_t bytes)>;

class KernelCapture {
 public:
  // Sets up the instance and starts tracing. Errors: kNotFound (no tracefs, unknown event),
  // kIoError (not root, tracefs refused a setting), kInvalidArgument (malformed GROUPS).
  static Result<std::unique_ptr<KernelCapture>> start(const CaptureOptions& options);
  ~KernelCapture();  // stops tracing and removes the instance

  // Reads what the per-CPU buffers hold into sink, at most every 10 ms unless final (then
  // tracing stops first and everything left is read).
  Status drain(const PageSink& sink, bool final);
  // Flight capture: the kernel's last events, buffer_kb per CPU at most: what each CPU's
  // buffer holds now (read while tracing goes on, which empties it) after what earlier
  // windows took (kept in memory up to the same size, so that a window reaches as far back
  // whether or not another one was read just before). The sub-buffers wholly older than
  // since_ticks (the oldest user-space record it goes with) are left out. meta.start_ticks:
  // from when the window holds every event; meta.losses: what ftrace overwrote or dropped
  // since the capture began.
  Result<KernelWindow> read_window(uint64_t since_ticks);
  // Re-applies the thread filters if the traced processes started or ended threads; cheap
  // enough to call about once a second.
  Status refresh_threads();
  // Adds a process whose threads the filters let through (`nanotrace run`: each process the
  // command starts, as it is found); takes effect at the next refresh_threads().
  void follow(uint32_t pid);
  // What a reader needs to decode the pages, with the latest loss counters.
  file::KernelMeta meta() const;
  const std::string& instance_name() const { return instance_->name(); }
  uint64_t pages() const;

 private:
  KernelCapture() = default;
  // start's steps: the instance's clock and buffer size; the formats a reader needs; the
  // events switched on; a reader per CPU (and the sub-buffer size).
  Status configure_instance();
  Status read_formats();
  Status enable_events();
  Status open_cpu_readers();
  Status apply_filters();
  void read_losses(file::KernelMeta* meta) const;

  struct Cpu {
    uint32_t cpu = 0;
    tracefs_cpu* reader = nullptr;
    uint64_t position = 0;
    uint64_t pages = 0;
    uint64_t overrun_seen = 0;  // ftrace's counters at the previous window
    uint64_t dropped_seen = 0;
    // Flight: what earlier windows read, oldest first; gap: events were lost (overwritten,
    // dropped, or let go by the size bound) just before its sub-buffers.
    struct Read {
      std::vector<uint8_t> pages;
      bool gap = false;
    };
    std::deque<Read> history;
    bool gap_pending = false;
  };
  // read_window's steps for one CPU. flush_into: appends what its buffer holds to pages, up
  // to limit bytes. trim_history: keeps at most cap bytes, the oldest going first (a gap).
  // window_of: its history from the last sub-buffer starting at or before since_ticks
  // (sub-buffer i ends before sub-buffer i + 1 starts); raises complete_from to where that
  // history is complete: the first sub-buffer after the last gap (events ftrace lost, or
  // sub-buffers let go).
  Status flush_into(const Cpu& c, size_t limit, std::vector<uint8_t>* pages) const;
  static void trim_history(std::deque<Cpu::Read>* history, size_t cap);
  std::vector<uint8_t> window_of(const Cpu& c, uint64_t since_ticks, uint64_t* complete_from) const;
  uint64_t now_ticks() const;
  CaptureOptions options_;
  std::unique_ptr<FtraceInstance> instance_;
  std::vector<EventSpec> events_;
  std::vector<uint32_t> pids_;  // the processes followed
  std::vector<uint32_t> tids_;  // their threads, sorted
  std::vector<Cpu> cpus_;
  uint32_t cpu_count_ = 0;
  uint32_t page_size_ = 0;
  file::KernelMeta formats_;  // everything but the losses
  std::vector<uint8_t> buf_;
  double last_drain_ = 0;
  bool stopped_ = false;
};

}  // namespace nanotrace::kernel
