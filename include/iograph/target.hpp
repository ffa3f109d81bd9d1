// iograph: targets, the things a graph's operations act on.
//   nop         IORING_OP_NOP for the io_uring backends (nothing for sync); supports error
//               injection so tests can fail chosen nodes.
//   zero        /dev/zero.
//   file:PATH   an existing file or block device, opened with O_DIRECT when the file system
//               allows it, else buffered (describe() says which).
//   loop        a loop device with direct I/O over a fresh file in /dev/shm. Needs root. The
//               device and the backing file are always removed: the file is unlinked as soon
//               as the device holds it, the device is bound with LO_FLAGS_AUTOCLEAR (so the
//               kernel unbinds it when the last descriptor closes, even if the process is
//               killed) and the destructor also detaches it explicitly.
//
// Thread safety: a Target may be shared by executors on several threads once opened;
// inject_failure and clear_injections need external synchronisation with running executors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/status.hpp"

namespace iograph {

using nanotrace::Result;
using nanotrace::Status;

enum class TargetKind : uint8_t { kNop, kZero, kFile, kLoop };

class Target {
 public:
  virtual ~Target() = default;
  virtual TargetKind kind() const = 0;
  // One line for reports, e.g. "file:/data/img (O_DIRECT)" or "loop:/dev/loop3 (direct I/O)".
  virtual std::string describe() const = 0;
  // Descriptor of file slot 0, or -1 for the nop target.
  virtual int fd() const = 0;
  // True when the descriptor was opened with O_DIRECT (buffers must be 4096-aligned).
  virtual bool direct_io() const = 0;
  // Bytes addressable, or 0 when unbounded (nop, zero).
  virtual uint64_t size_bytes() const = 0;

  // inject_failure: makes node `node` complete with `error` (a negative errno) on every
  // following run. Only the nop target supports it (through IORING_NOP_INJECT_RESULT).
  // Errors: kUnsupported on other targets, kInvalidArgument when error >= 0.
  Status inject_failure(uint32_t node, int error);
  void clear_injections() { injected_.clear(); }
  // Result injected for `node`, 0 when none.
  int injected(uint32_t node) const { return node < injected_.size() ? injected_[node] : 0; }

 private:
  std::vector<int> injected_;
};

struct TargetOptions {
  uint64_t loop_bytes = 64ull << 20;  // size of the loop target's backing file
  std::string loop_dir = "/dev/shm";  // where the backing file is created
  // Called by the loop target after the device is bound and before it is returned; an error
  // makes open_target fail and undo everything. Exists so tests can check the cleanup path.
  std::function<Status(const std::string& device, const std::string& backing_file)> loop_after_bind;
};

// open_target: opens "nop", "zero", "file:PATH" or "loop".
// Errors: kInvalidArgument for an unknown spec; kNotFound when PATH does not exist;
// kIoError when a system call fails (message names it and the errno text); kUnsupported for
// loop when not root or when /dev/loop-control is missing.
Result<std::unique_ptr<Target>> open_target(std::string_view spec,
                                            const TargetOptions& options = {});

}  // namespace iograph
