// The loop target: a loop device with direct I/O over a fresh file in /dev/shm, the closest
// stand-in for null_blk this kernel has (real asynchronous block completions). Setup is
// ordered so that nothing outlives the process: the backing file is unlinked as soon as it is
// created (the descriptor fills and binds it), signals are held while it has no device, and
// the device is bound with LO_FLAGS_AUTOCLEAR (the kernel unbinds it on the last close, even
// after SIGKILL).
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/loop.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <vector>

#include "targets_internal.hpp"

namespace iograph::internal {
namespace {

// Holds SIGINT, SIGTERM and SIGHUP on this thread for its lifetime; a signal that arrives
// meanwhile is delivered when the scope ends, once the device cleans itself up.
class SignalHold {
 public:
  SignalHold() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalHold() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

// Everything created so far, undone by release() in reverse order.
struct LoopParts {
  std::string backing;
  int backing_fd = -1;
  std::string device;
  int device_fd = -1;
  bool bound = false;

  void release() {
    if (bound) ioctl(device_fd, LOOP_CLR_FD, 0);
    bound = false;
    if (device_fd >= 0) ::close(device_fd);
    device_fd = -1;
    if (backing_fd >= 0) ::close(backing_fd);
    backing_fd = -1;
    if (!backing.empty()) ::unlink(backing.c_str());
    backing.clear();
  }
};

class LoopTarget final : public Target {
 public:
  LoopTarget(LoopParts parts, uint64_t size, bool dio)
      : parts_(std::move(parts)), size_(size), dio_(dio) {}
  ~LoopTarget() override { parts_.release(); }

  TargetKind kind() const override { return TargetKind::kLoop; }
  std::string describe() const override {
    return fmt::format("loop:{} ({})", parts_.device,
                       dio_ ? "direct I/O over /dev/shm, O_DIRECT"
                            : "O_DIRECT, but the loop driver refused direct I/O to its file");
  }
  int fd() const override { return parts_.device_fd; }
  bool direct_io() const override { return true; }
  uint64_t size_bytes() const override { return size_; }

 private:
  LoopParts parts_;
  uint64_t size_;
  bool dio_;
};

Status fill_backing_file(int fd, uint64_t bytes) {
  // Non-zero data, so reads move real bytes and the file is fully allocated.
  std::vector<char> chunk(1 << 20);
  for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>('a' + i % 23);
  for (uint64_t done = 0; done < bytes;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), bytes - done));
    ssize_t w = ::pwrite(fd, chunk.data(), n, static_cast<off_t>(done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("loop target: filling the backing file", errno);
    }
    done += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

std::atomic<uint32_t> g_loop_counter{0};

Status bind_device(LoopParts& parts) {
  int control = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (control < 0) return Status::FromErrno("loop target: open /dev/loop-control", errno);
  Status status;
  // LOOP_CTL_GET_FREE can race with another process binding the same device: retry.
  for (int attempt = 0; attempt < 8; ++attempt) {
    int index = ioctl(control, LOOP_CTL_GET_FREE);
    if (index < 0) {
      status = Status::FromErrno("loop target: LOOP_CTL_GET_FREE", errno);
      break;
    }
    parts.device = fmt::format("/dev/loop{}", index);
    parts.device_fd = ::open(parts.device.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
    if (parts.device_fd < 0) {
      status = Status::FromErrno("loop target: open " + parts.device, errno);
      break;
    }
    loop_config config = {};
    config.fd = static_cast<uint32_t>(parts.backing_fd);
    config.block_size = 4096;
    config.info.lo_flags = LO_FLAGS_DIRECT_IO | LO_FLAGS_AUTOCLEAR;
    if (ioctl(parts.device_fd, LOOP_CONFIGURE, &config) == 0) {
      parts.bound = true;
      status = Status::Ok();
      break;
    }
    int err = errno;
    ::close(parts.device_fd);
    parts.device_fd = -1;
    status = Status::FromErrno("loop target: LOOP_CONFIGURE " + parts.device, err);
    if (err != EBUSY) break;
  }
  ::close(control);
  return status;
}

bool device_uses_direct_io(const std::string& device) {
  std::ifstream dio(fmt::format("/sys/block/{}/loop/dio", device.substr(5)));
  int value = 0;
  return dio >> value && value == 1;
}

}  // namespace

Result<std::unique_ptr<Target>> open_loop_target(const TargetOptions& options) {
  if (::geteuid() != 0) return Status::Unsupported("loop target: needs root");
  if (::access("/dev/loop-control", F_OK) != 0) {
    return Status::Unsupported("loop target: /dev/loop-control is missing (no loop driver)");
  }
  if (options.loop_bytes < 4096 || options.loop_bytes % 4096 != 0) {
    return Status::Invalid("loop target: size must be a positive multiple of 4096");
  }
  SignalHold hold;
  LoopParts parts;
  parts.backing = fmt::format("{}/iograph-loop-{}-{}.img", options.loop_dir, ::getpid(),
                              g_loop_counter.fetch_add(1));
  parts.backing_fd = ::open(parts.backing.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (parts.backing_fd < 0) {
    Status s = Status::FromErrno("loop target: create " + parts.backing, errno);
    parts.backing.clear();  // not ours to unlink
    return s;
  }
  // Unlinked at once: the descriptor fills and binds it, and a process killed while it sets up
  // (SIGKILL cannot be held) leaves no file of tens of MiB behind in /dev/shm.
  const std::string backing_name = parts.backing;
  ::unlink(parts.backing.c_str());
  parts.backing.clear();
  Status status = fill_backing_file(parts.backing_fd, options.loop_bytes);
  if (status.ok()) status = bind_device(parts);
  if (status.ok() && options.loop_after_bind) {
    status = options.loop_after_bind(parts.device, backing_name);
  }
  if (!status.ok()) {
    parts.release();
    return status;
  }
  // The device holds the file now; it does not need our descriptor any more.
  ::close(parts.backing_fd);
  parts.backing_fd = -1;
  bool dio = device_uses_direct_io(parts.device);
  return std::unique_ptr<Target>(new LoopTarget(std::move(parts), options.loop_bytes, dio));
}

}  // namespace iograph::internal
