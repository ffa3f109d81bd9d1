// Test host: a traced program that loads a plugin with tracepoints, fires its events and
// then either unloads it and keeps tracing (--close) or keeps it loaded.
//
//   dlopen_host PLUGIN.so [--close] [--tick]
//
// Prints "pid <pid>", then "loaded" once the plugin's events are written, then (with
// --close) "closed" after dlclose. With --tick it keeps writing its own events (about one
// each 100 us) until a line or the end comes on stdin; then it prints "ready" and exits 0
// when stdin closes.
#include <dlfcn.h>
#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/nanotrace.hpp>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  bool close = false;
  bool tick = false;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--close")) {
      close = true;
    } else if (!std::strcmp(argv[i], "--tick")) {
      tick = true;
    } else {
      return 2;
    }
  }
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  NANOTRACE(host, start, "n={}", uint64_t{1});
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  auto fire = reinterpret_cast<void (*)(uint64_t)>(dlsym(plugin, "plugin_fire"));
  auto fire_thread = reinterpret_cast<void (*)(uint64_t)>(dlsym(plugin, "plugin_fire_thread"));
  if (!fire || !fire_thread) return 4;
  fire(100);
  fire_thread(100);
  std::printf("loaded\n");
  std::fflush(stdout);
  if (close) {
    if (dlclose(plugin) != 0) return 5;
    std::printf("closed\n");
    std::fflush(stdout);
  }
  uint64_t i = 0;
  pollfd in{0, POLLIN, 0};
  while (tick && ::poll(&in, 1, 0) == 0) {
    NANOTRACE(host, tick, "i={}", i++);
    usleep(100);
  }
  NANOTRACE(host, done, "ticks={}", i);
  std::printf("ready\n");
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  return 0;
}
