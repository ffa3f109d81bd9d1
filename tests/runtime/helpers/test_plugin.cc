// Test plugin: a shared object with its own tracepoints (group "plugin"), loaded with
// dlopen by dlopen_host.cc. Built twice: resolving the runtime from its host (the host
// exports it), and with the static library linked in (a second copy of the runtime).
#include <cstdint>
#include <nanotrace/nanotrace.hpp>
#include <thread>

extern "C" {

// Writes n records plugin:ev{i, check}, check = i * 3 + 1.
void plugin_fire(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) NANOTRACE(plugin, ev, "i={} check={}", i, i * 3 + 1);
}

// The same from a new thread of the plugin's own.
void plugin_fire_thread(uint64_t n) {
  std::thread([n] { plugin_fire(n); }).join();
}
}
