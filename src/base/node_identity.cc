// This machine's hostname and node identity (base/node_identity.hpp).
#include "base/node_identity.hpp"

#include <unistd.h>

#include <cstdlib>

#include "base/process.hpp"

namespace nanotrace::sys {
namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string from_env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::string(v) : fallback;
}

}  // namespace

std::string hostname() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  return host;
}

NodeIdentity node_identity(const std::string& name) {
  NodeIdentity id;
  id.hostname = from_env_or("NANOTRACE_NODE_NAME", name.empty() ? hostname() : name);
  id.machine_id =
      from_env_or("NANOTRACE_NODE_MACHINE_ID", trimmed(read_proc_file("/etc/machine-id")));
  id.boot_id = from_env_or("NANOTRACE_NODE_BOOT_ID",
                           trimmed(read_proc_file("/proc/sys/kernel/random/boot_id")));
  return id;
}

}  // namespace nanotrace::sys
