// Kernel events into a trace file, for `record --kernel` and `run --kernel`: starts the
// capture (what cannot be captured becomes a warning, a malformed request an error), stores
// the formats (KERNEL_META), the per-CPU sub-buffers as they fill (KERNEL_DATA) and, at the
// end, the formats again with ftrace's final loss counters. A flight capture's window goes
// into a snapshot file the same way (write_kernel_window).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernel/kernel_capture.hpp"
#include "nanotrace/status.hpp"
#include "record/file_writer.hpp"

namespace nanotrace::rec {

class KernelRecording {
 public:
  // Starts capturing `groups` for process pid into out. A capture that cannot be set up
  // (not root, no tracefs, an event this kernel lacks) leaves the recording inactive and
  // says why in *warning; errors: kInvalidArgument (a malformed item), kIoError (writing).
  static Result<std::unique_ptr<KernelRecording>> start(const std::vector<std::string>& groups,
                                                        uint32_t buffer_kb, uint32_t pid,
                                                        bool tsc_clock, FileWriter& out,
                                                        std::string* warning);

  // Stores what ftrace's buffers hold (at most every 10 ms unless final; final stops the
  // capture and takes everything left).
  Status drain(bool final);
  // Lets the events of another process's threads through the filters from the next
  // refresh_threads(), which re-reads the threads of every process followed.
  void follow(uint32_t pid);
  Status refresh_threads();
  // Stores the final loss counters and removes the instance. pages: sub-buffers stored;
  // lost: events ftrace overwrote or dropped.
  Status finish(uint64_t* pages, uint64_t* lost);

 private:
  KernelRecording(std::unique_ptr<kernel::KernelCapture> capture, FileWriter& out)
      : capture_(std::move(capture)), out_(out) {}
  Status write_meta(const file::KernelMeta& meta);

  std::unique_ptr<kernel::KernelCapture> capture_;
  FileWriter& out_;
};

// Writes what a flight capture's buffers held (KernelCapture::read_window) into a snapshot
// file: KERNEL_META with the window's losses, then each CPU's sub-buffers (KERNEL_DATA).
Status write_kernel_window(const kernel::KernelWindow& window, FileWriter& out);

}  // namespace nanotrace::rec
