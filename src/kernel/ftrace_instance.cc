// Creating, configuring and removing our tracefs instance, and finding the ones dead
// recorders left.
#include "kernel/ftrace_instance.hpp"

#include <errno.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/process.hpp"
#include "kernel/tracefs_cxx.hpp"

namespace nanotrace::kernel {
namespace {

constexpr char kPrefix[] = "nanotrace-";

// "nanotrace-<pid>-<start time>[-flight]" -> pid and start time; false for any other name.
bool parse_name(const std::string& name, uint32_t* pid, uint64_t* start_time) {
  if (name.rfind(kPrefix, 0) != 0) return false;
  const char* p = name.c_str() + sizeof(kPrefix) - 1;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(p, &end, 10);
  if (errno || end == p || *end != '-' || v == 0 || v > 0xffffffffull) return false;
  const char* q = end + 1;
  unsigned long long t = std::strtoull(q, &end, 10);
  if (errno || end == q) return false;
  if (*end != '\0' && std::strcmp(end, kFlightSuffix) != 0) return false;
  *pid = static_cast<uint32_t>(v);
  *start_time = t;
  return true;
}

}  // namespace

std::string instance_name(uint32_t pid, uint64_t start_time, bool flight) {
  return std::string(kPrefix) + std::to_string(pid) + "-" + std::to_string(start_time) +
         (flight ? kFlightSuffix : "");
}

Result<std::unique_ptr<FtraceInstance>> FtraceInstance::create(bool flight) {
  if (!tracefs_tracing_dir()) {
    return Status::NotFound(
        "tracefs is not mounted and cannot be (mount -t tracefs nodev "
        "/sys/kernel/tracing)");
  }
  const auto pid = static_cast<uint32_t>(getpid());
  std::unique_ptr<FtraceInstance> inst(new FtraceInstance());
  inst->name_ = instance_name(pid, sys::proc_start_time(pid), flight);
  errno = 0;
  inst->instance_ = tracefs_instance_create(inst->name_.c_str());
  if (!inst->instance_) {
    int err = errno ? errno : EIO;
    if (err == EACCES || err == EPERM) {
      return Status::IoError("kernel events need root: cannot create a tracefs instance (" +
                             std::string(strerror(err)) + ")");
    }
    return Status::FromErrno("creating tracefs instance " + inst->name_, err);
  }
  return inst;
}

FtraceInstance::~FtraceInstance() {
  if (!instance_) return;
  tracefs_trace_off(instance_);
  tracefs_instance_destroy(instance_);
  tracefs_instance_free(instance_);
}

Status FtraceInstance::write(const std::string& file, const std::string& value) {
  errno = 0;
  if (tracefs_instance_file_write(instance_, file.c_str(), value.c_str()) < 0) {
    return Status::FromErrno("tracefs " + name_ + "/" + file + " <- '" + value + "'",
                             errno ? errno : EIO);
  }
  return Status::Ok();
}

std::string FtraceInstance::read(const std::string& file) const {
  int size = 0;
  char* text = tracefs_instance_file_read(instance_, file.c_str(), &size);
  if (!text) return "";
  std::string out(text, size > 0 ? static_cast<size_t>(size) : 0);
  free(text);
  return out;
}

std::vector<StaleInstance> remove_stale_instances(bool dry_run) {
  std::vector<StaleInstance> out;
  if (!tracefs_tracing_dir()) return out;
  // Every instance, filtered by parse_name: libtracefs 1.6 leaks the regex it compiles for a
  // pattern passed to tracefs_instances.
  char** names = tracefs_instances(nullptr);
  if (!names) return out;
  for (char** p = names; *p; ++p) {
    uint32_t pid = 0;
    uint64_t start_time = 0;
    if (!parse_name(*p, &pid, &start_time)) continue;
    if (sys::process_alive(pid, start_time)) continue;
    StaleInstance s{*p, pid, ""};
    if (!dry_run) {
      tracefs_instance* inst = tracefs_instance_alloc(nullptr, *p);
      errno = 0;
      if (!inst) {
        s.error = strerror(errno ? errno : EIO);
      } else {
        tracefs_trace_off(inst);
        if (tracefs_instance_destroy(inst) < 0) s.error = strerror(errno ? errno : EIO);
        tracefs_instance_free(inst);
      }
    }
    out.push_back(std::move(s));
  }
  tracefs_list_free(names);
  return out;
}

}  // namespace nanotrace::kernel
