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
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "nanotrace/abi.hpp"
#include "nanotrace/control.hpp"
#include "nanotrace/detail/fields.hpp"
#include "nanotrace/status.hpp"
#include "nanotrace/trigger.hpp"

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
  bool crash_handler = false;
  std::string trigger;  // expression armed at start (NANOTRACE_TRIGGER)
  uint64_t trigger_after_events = 0;
  uint64_t trigger_after_ns = 0;
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

  // Triggers (trigger_runtime.cc). REQUIRES: mu held.
  Status arm_locked(const std::string& expression, uint64_t after_events, uint64_t after_ns);
  void disarm_locked();
  Status resume_locked();
  // Handles a request a controller wrote into the segment (arm/disarm/resume).
  void process_trigger_request_locked();
  // Value of a site's enable byte: 0 off, 1 on, 2 on and watched by the trigger.
  uint8_t site_state_locked(const detail::Site* site, bool group_enabled) const;

  // The armed trigger, immutable once published; replaced (and kept, never freed: a racing
  // thread may still read it) when re-armed.
  struct ArmedTrigger {
    Trigger expression;
    std::unordered_map<const detail::Site*, std::vector<uint32_t>> fields;
    uint64_t after_events = 0;
    uint64_t after_ns = 0;
  };
  const ArmedTrigger* armed = nullptr;
  uint32_t trigger_requests_seen = 0;

 private:
  Runtime() = default;
};

// Installs the fatal-signal handler that marks the segment crashed (crash_handler.cc).
void install_crash_handler();

// Thread-exit destructor of a claimed ring: marks the slot exited (readable until reused).
void release_ring(void* slot);
// Called from reserve_slow on a thread's first event. Returns false if no ring is available.
bool claim_ring_for_this_thread();

}  // namespace nanotrace::runtime
