// A tracefs instance of our own (instances/nanotrace-<pid>-<start time>, and
// nanotrace-<pid>-<start time>-flight for the kernel history of a recorder's snapshots), so that
// other tracers on the machine keep their buffers, clock and events. It is removed when the object
// goes; an instance whose recorder died (SIGKILL) is found by its name and removed by
// `nanotrace clean` (remove_stale_instances).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nanotrace/status.hpp"

struct tracefs_instance;

namespace nanotrace::kernel {

class FtraceInstance {
 public:
  // Creates the instance of this process, or its flight instance (an instance left by an
  // earlier process with our pid and start time cannot exist: that process is us).
  static Result<std::unique_ptr<FtraceInstance>> create(bool flight = false);
  ~FtraceInstance();  // tracing off, instance removed
  FtraceInstance(const FtraceInstance&) = delete;
  FtraceInstance& operator=(const FtraceInstance&) = delete;

  tracefs_instance* handle() const { return instance_; }
  const std::string& name() const { return name_; }

  // Writes `value` to a file of the instance (e.g. "trace_clock").
  Status write(const std::string& file, const std::string& value);
  // Reads a file of the instance; "" if it cannot be read.
  std::string read(const std::string& file) const;

 private:
  FtraceInstance() = default;
  tracefs_instance* instance_ = nullptr;
  std::string name_;
};

// The suffix of a flight instance's name.
inline constexpr char kFlightSuffix[] = "-flight";
// The instance name a recorder with this pid and start time uses.
std::string instance_name(uint32_t pid, uint64_t start_time, bool flight = false);

struct StaleInstance {
  std::string name;
  uint32_t pid = 0;
  std::string error;  // non-empty if it could not be removed
};
// Instances named by a recorder that is gone (dead pid, or the pid is another process now);
// removed unless dry_run. Nothing at all without tracefs.
std::vector<StaleInstance> remove_stale_instances(bool dry_run);

}  // namespace nanotrace::kernel
