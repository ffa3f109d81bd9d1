// Process-wide state of the nanotrace runtime in a traced process: configuration, the
// segment it writes, the registered call sites, and the control thread. Internal header.
//
// Thread safety: fields below `mu` are guarded by it; the hot path never takes it.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "nanotrace/abi.hpp"
#include "nanotrace/control.hpp"
#include "nanotrace/detail/fields.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::detail {
// The slot every thread's writer points at before it claims a ring: head 0, never written.
extern abi::ThreadSlot g_unclaimed_slot;
}  // namespace nanotrace::detail

namespace nanotrace::runtime {

struct Config {
  Mode mode = Mode::kOverwrite;
  uint32_t ring_size = 1u << 20;
  uint32_t max_threads = 256;
  std::string groups = "all";
  std::string name;
  bool keep_on_exit = false;
  bool force_monotonic = false;
};

// Reads NANOTRACE_* variables over the defaults. Malformed values are reported on stderr
// once and ignored (a traced program must not fail to start because of a typo).
Config config_from_environment();
// Applies options over a config. Returns an error for out-of-range values.
Status apply_options(const Options& options, Config* config);
// True if the group is enabled by a spec like "all", "io,sched", "all,-debug".
bool group_enabled_by_spec(const std::string& spec, const std::string& group);

// An open, mapped segment owned by this process.
struct Segment {
  int fd = -1;
  uint8_t* base = nullptr;
  uint64_t size = 0;
  std::string name;  // shm name, e.g. "/nanotrace-1234"
  abi::SegmentHeader* header() const { return reinterpret_cast<abi::SegmentHeader*>(base); }
  abi::ThreadSlot* slot(uint32_t i) const;
  uint8_t* ring(uint32_t i) const;
};

// Creates /dev/shm/nanotrace-<pid> (mode 0600) laid out for the config.
Result<Segment> create_segment(const Config& config, pid_t pid);
void destroy_segment(Segment* segment, bool unlink);
// Appends a string to the segment's pool; returns its offset (0 = the empty string).
uint32_t intern_string(const Segment& segment, const char* text);

// Clock (clock.cc).
bool tsc_is_invariant();
abi::ClockPair sample_clock_pair(abi::ClockKind kind);
uint64_t estimate_ticks_per_second(abi::ClockKind kind);
void refresh_clock(abi::SegmentHeader* header);

class Runtime {
 public:
  static Runtime& instance();

  std::mutex mu;
  Config config;
  Segment segment;
  pid_t pid = 0;
  bool started = false;
  bool any_ring_claimed = false;
  bool control_thread_running = false;
  std::vector<detail::Site*> sites;  // registration order; id = index + 1
  std::unordered_set<detail::Site*> known_sites;
  std::vector<std::string> groups;  // group table order
  pthread_key_t exit_key{};

  // REQUIRES: mu held. Creates the segment and publishes every known site.
  Status start_locked();
  // REQUIRES: mu held. Adds one site to the segment (events table, groups).
  void publish_site_locked(detail::Site* site);
  // REQUIRES: mu held. Sets every site's enabled flag from the segment's group table.
  void apply_groups_locked();
  // REQUIRES: mu held. Tears down and rebuilds the segment (before any ring is claimed).
  Status restart_locked();

  void start_control_thread();
  void after_fork_in_child();

 private:
  Runtime() = default;
};

// Thread-exit destructor of a claimed ring: marks the slot exited (readable until reused).
void release_ring(void* slot);
// Called from reserve_slow on a thread's first event. Returns false if no ring is available.
bool claim_ring_for_this_thread();

}  // namespace nanotrace::runtime
