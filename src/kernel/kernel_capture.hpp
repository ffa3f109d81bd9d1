// Capturing kernel events for `nanotrace record --kernel`: our own tracefs instance with the
// selected events, on the clock of the traced process's records (x86-tsc for TSC ticks, mono
// for CLOCK_MONOTONIC nanoseconds: the same values, so nothing is converted), filtered to its
// threads where the event names a thread, and read per CPU as raw ring-buffer sub-buffers
// (trace_pipe_raw) that go to the trace file unchanged. The reader decodes them with the
// formats stored in the KERNEL_META chunk.
#pragma once

#include <cstdint>
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
  Status apply_filters();
  void read_losses(file::KernelMeta* meta) const;

  struct Cpu {
    uint32_t cpu = 0;
    tracefs_cpu* reader = nullptr;
    uint64_t position = 0;
    uint64_t pages = 0;
  };
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
