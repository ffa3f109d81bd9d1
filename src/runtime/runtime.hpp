// Process-wide state of the nanotrace runtime in a traced process: configuration, the
// segment it writes, the registered call sites, and the control thread. Internal header.
//
// Thread safety: fields below `mu` are guarded by it; the hot path and the slow path of a
// tracepoint never take it (slots are claimed with atomic operations on the segment), except
// on a thread's first event in a process that has no segment yet (a fork child).
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
#include "runtime/self_stat.hpp"

namespace nanotrace::detail {
struct Writer;
// The slot every thread's writer points at before it claims a ring: head 0, check 0.
extern abi::ThreadSlot g_unclaimed_slot;
}  // namespace nanotrace::detail

namespace nanotrace::runtime {

struct DurationPairing;

// The control thread makes rings ready in advance once this many were claimed (see
// Runtime::rings_claimed).
constexpr uint32_t kRingsBeforePreparing = 2;

struct Config {
  Mode mode = Mode::kOverwrite;
  uint32_t ring_size = 1u << 20;
  uint32_t max_threads = 256;
  std::string groups = "all";
  std::string name;
  bool keep_on_exit = false;
  bool force_monotonic = false;
  bool crash_handler = false;
  uint64_t block_timeout_ns = 100'000'000;  // ~0: wait as long as the consumer lives
  uint64_t block_max_age_ns = 0;            // 0: kBlockMaxAgeTicks (NANOTRACE_BLOCK_MAX_AGE)
  std::string trigger;                      // expression armed at start (NANOTRACE_TRIGGER)
  uint64_t trigger_after_events = 0;
  uint64_t trigger_after_ns = 0;
  uint64_t run_id = 0;  // NANOTRACE_RUN_ID, set by `nanotrace run`
};
inline constexpr uint64_t kWaitForever = ~uint64_t{0};
// A record's first word keeps 48 bits of its clock value, read as a signed difference from
// its block's base (abi::expand_ticks): a block stays open at most 2^46 ticks (at least 4
// hours at 5 GHz), so that an idle thread's record written hours after its block began is
// still placed in time. The control thread sends every writer through the slow path at
// least this often, where a block older than that is ended.
inline constexpr uint64_t kBlockMaxAgeTicks = uint64_t{1} << 46;
inline constexpr uint64_t kBlockRenewalNs = 600'000'000'000;  // 10 minutes

// Reads NANOTRACE_* variables over the defaults. A value that is not understood is reported
// on stderr once, saying what is in effect instead (a traced program must not fail to start
// because of a typo).
Config config_from_environment();
// Applies options over a config. Returns an error for out-of-range values.
Status apply_options(const Options& options, Config* config);
// True if the group is enabled by a spec like "all", "io,sched", "all,-debug".
bool group_enabled_by_spec(const std::string& spec, const std::string& group);

// An open, mapped segment owned by this process. The descriptor holds the writer lock
// (sys::kWriterLockByte) for as long as the process lives in this image.
struct Segment {
  int fd = -1;    // may be taken by the program: see segment_descriptor.cc
  dev_t dev = 0;  // the file's identity, to tell whether fd still names it
  ino_t ino = 0;
  uint8_t* base = nullptr;
  uint64_t size = 0;
  std::string path;               // e.g. /dev/shm/nanotrace-1234
  std::vector<bool> table_pages;  // pages of the table region known allocated
  abi::SegmentHeader* header() const { return reinterpret_cast<abi::SegmentHeader*>(base); }
  abi::ThreadSlot* slot(uint32_t i) const;
  uint8_t* ring(uint32_t i) const;
  uint64_t ring_offset(uint32_t i) const;
};

// Publishes one fact in the segment header (a trigger's firing, a duration trigger's
// counts). Firings of successive rounds may run on different threads, and a freeze may still
// be stamping while the next round is armed: each fact is one atomic store, and readers take
// them after the state (a release).
template <typename T, typename V>
void store_fact(T* fact, V value) {
  static_assert(sizeof(V) <= sizeof(T));
  __atomic_store_n(fact, static_cast<T>(value), __ATOMIC_RELAXED);
}

// Distinguishes the images of one process: exec keeps the pid and the start time, but the
// kernel gives each image new AT_RANDOM bytes.
uint64_t this_image_id();

// Creates this process's segment (mode 0600, sparse: only the header page is allocated)
// laid out for the config, and takes its writer lock. A segment left under the name by an
// earlier image of this process (exec) is removed; one left by an earlier process with the
// same pid is set aside as evidence; a name taken by someone else is avoided.
Result<Segment> create_segment(const Config& config, pid_t pid);

// The segment's descriptor (segment_descriptor.cc). A program may close it and reuse its
// number: nothing is allocated, locked or closed through it before these say it is ours.
// Records the identity of segment->fd's file. False if it cannot be read.
bool note_segment_identity(Segment* segment);
// True if segment.fd still names the segment's file.
bool segment_fd_is_ours(const Segment& segment);
// Opens the segment again by its path if the program took its descriptor (the taken number
// is left to the program). False if that fails: allocations then fail and are counted as
// losses. REQUIRES: the runtime mutex.
bool reclaim_segment_fd(Segment* segment);
// Unmaps the segment and closes its descriptor if still ours; removes the file if `unlink`.
void destroy_segment(Segment* segment, bool unlink);
// Makes sure the table bytes [begin, end) are allocated (whole pages, one fallocate for those
// not yet allocated), so writing them cannot raise SIGBUS. REQUIRES: the runtime mutex.
bool reserve_table_bytes(Segment* segment, uint64_t begin, uint64_t end);
// Maps the allocated pages of [offset, offset + bytes) that are about to be written, in one
// system call: a page fault on each costs twice as much in a virtual machine (12 us against
// 6 us here, the access that follows included). Best effort: a kernel without
// MADV_POPULATE_WRITE leaves them to fault.
void map_for_writing(const Segment& segment, uint64_t offset, uint64_t bytes);
// Appends a string to the segment's pool; returns its offset (0 = the empty string).
uint32_t intern_string(Segment& segment, const char* text);
// Allocates slot i's ring unless done before. False if /dev/shm is
// full.
bool prepare_ring(const Segment& segment, uint32_t i);
// Allocates the first block of slot i's ring (its other blocks are allocated as its writer
// reaches them), so that the first event of the thread that claims it makes no system call.
// False if /dev/shm is full.
bool prepare_first_block(const Segment& segment, uint32_t i);

// Clock (clock.cc).
abi::ClockPair sample_clock_pair(abi::ClockKind kind);
// The tick rate: from the header if known, else from the start pair and a pair taken now
// (waiting until they are 1 ms apart, which only a process younger than that must do).
uint64_t ticks_per_second_now(abi::SegmentHeader* header);
// Refreshes clock_latest (and ticks_per_second once the baseline is long enough).
void refresh_clock(abi::SegmentHeader* header);

class Runtime {
 public:
  static Runtime& instance();

  std::mutex mu;
  Config config;
  Segment segment;
  pid_t pid = 0;
  std::atomic<bool> started{false};
  bool start_failed = false;  // reported once; the slow path stops trying
  std::atomic<bool> any_ring_claimed{false};
  // Rings claimed so far. Rings are made ready in advance only once a second one was claimed:
  // most short-lived programs have one thread, and would free that memory at exit unused.
  std::atomic<uint32_t> rings_claimed{0};
  // One past the highest slot this process has claimed or prepared in its segment: slots from
  // here on are untouched and free, so scans for a slot stop here rather than touch every
  // page of the slot table (each first touch is a page fault, tens of microseconds in a VM).
  std::atomic<uint32_t> slots_used_bound{0};
  uint32_t slot_scan_limit() const;  // slots_used_bound + 1, at most max_threads
  void note_slot_used(uint32_t i);
  // Free slots with memory made ready, as the control thread last counted them, less those
  // claimed since. A claim wakes the control thread only when they run low: a futex wake is
  // a system call, and on a busy virtual machine any system call may take tens of
  // microseconds.
  std::atomic<int32_t> ready_free_slots{0};
  void took_ready_slot();
  std::vector<detail::Site*> sites;  // registered sites (unregistered ones are removed)
  std::unordered_set<detail::Site*> known_sites;
  // Event ids of unregistered sites by descriptor, reused if the module is loaded again.
  std::unordered_map<std::string, uint16_t> retired_ids;
  std::vector<std::string> groups;  // group table order
  pthread_key_t exit_key{};

  // REQUIRES: mu held. Creates the segment, publishes every known site and starts the
  // control thread.
  Status start_locked();
  // Starts the runtime if it is not running (a fork child's first event). False if it could
  // not be started.
  bool ensure_started();
  // REQUIRES: mu held. Adds one site to the segment (events table, groups).
  void publish_site_locked(detail::Site* site);
  // REQUIRES: mu held. Sets every site's enabled flag from the segment's group table.
  void apply_groups_locked();
  // REQUIRES: mu held. Tears down and rebuilds the segment (before any ring is claimed).
  Status restart_locked();
  // The program is about to make `fd` name another file (dup2 onto it): if `fd` is the
  // segment's descriptor, the segment moves to another number first. Takes mu.
  void move_segment_fd_from(int fd);

  // Control thread (control_thread.cc).
  void start_control_thread();
  // Stops the control thread; waits for it to end only if `wait` (its code may be unloaded).
  // REQUIRES: mu not held.
  void stop_control_thread(bool wait);
  // Wakes it to prepare more rings.
  void request_ring_preparation();
  // Wakes it to look at the segment and the trigger again (a time window began).
  void wake_control_thread();
  pthread_t control_thread{};
  bool control_thread_running = false;
  // How old a ring block may grow before a record ends it (kBlockMaxAgeTicks, or
  // NANOTRACE_BLOCK_MAX_AGE in ticks, set by the control thread).
  std::atomic<uint64_t> block_max_age_ticks{kBlockMaxAgeTicks};
  SelfStat self_stat;  // the control thread's; closed in a fork child and at unload
  std::atomic<bool> control_stop{false};
  std::atomic<uint32_t> prepare_seq{0};  // futex word: bumped when a prepared ring is taken
  // A consumer was attached to this process's segment once (ring_writer.cc, block mode).
  std::atomic<bool> consumer_seen{false};

  void after_fork_in_child();

  // Triggers (trigger_control.cc, trigger_runtime.cc). REQUIRES: mu held.
  Status arm_locked(const std::string& expression, uint64_t after_events, uint64_t after_ns);
  // Arms NANOTRACE_TRIGGER if it is set and not armed yet: at start, and each time a module
  // registers its tracepoints (the event may be in one loaded later).
  void arm_from_environment_locked();
  Status disarm_locked();
  // The armed expression bound again, to the sites of a module registered since; the phase
  // (armed, fired or frozen) stays.
  void rebind_trigger_locked();
  Status resume_locked();
  // Freezes the rings now, as a trigger's end of window does, on a controller's request.
  Status freeze_locked();
  // Takes the segment's freeze_seq as answered (a new segment).
  void forget_freeze_requests();
  // A time window that fired: freezes the rings once its deadline has passed, whether or not
  // any thread writes again (the writers' slow path would only freeze them at their next
  // record). Returns the nanoseconds left until the deadline, or 0 if no time window is
  // running (any more). Called by the control thread, which sleeps at most that long.
  uint64_t end_time_window_locked();
  // Handles a request a controller wrote into the segment (arm/disarm/resume).
  void process_trigger_request_locked();
  // Freezes the rings if a controller bumped freeze_seq since the last freeze or resume (a
  // freeze signalled without a request, for a process that writes nothing).
  void process_freeze_request_locked();
  // Value of a site's enable byte: 0 off, 1 on, 2 on and watched by the trigger.
  uint8_t site_state_locked(const detail::Site* site, bool group_enabled) const;
  // Forgets the trigger's process-local state (fork child).
  void reset_trigger_after_fork();

  // The armed trigger, immutable once published; replaced (and kept, never freed: a racing
  // thread may still read it) when re-armed.
  struct ArmedTrigger {
    Trigger expression;
    std::unordered_map<const detail::Site*, std::vector<uint32_t>> fields;
    uint64_t after_events = 0;
    uint64_t after_ns = 0;
    // A duration trigger's pairing (duration_runtime.hpp); null for a record trigger.
    DurationPairing* duration = nullptr;
  };
  const ArmedTrigger* armed = nullptr;
  // Triggers armed before: kept (reachable, never freed) for threads that may still read one.
  std::vector<const ArmedTrigger*> retired_triggers;
  // REQUIRES: mu held. The expression bound to the registered sites (an error if none has
  // the event and fields it names), not armed yet.
  Result<const ArmedTrigger*> bind_trigger_locked(const std::string& expression,
                                                  uint64_t after_events, uint64_t after_ns);
  // REQUIRES: mu held. Publishes `next` (or none) to the writers, retiring the one armed.
  void replace_armed_locked(const ArmedTrigger* next);
  uint32_t trigger_requests_seen = 0;
  bool environment_trigger_warned = false;

 private:
  Runtime() = default;
};

// Another copy of the runtime in the same process image (a static library linked into a
// plugin as well as into its host, say) that this copy forwards every call to, so that the
// process has one segment, one event table and one trigger (forwarding.cc).
struct RuntimeApi {
  uint64_t magic;
  uint32_t version;
  uint32_t size;
  uint64_t (*reserve_slow)(uint32_t bytes, abi::ThreadSlot* slot) noexcept;
  bool (*special_event)(const detail::Site& site, uint64_t* record) noexcept;
  bool (*register_sites)(detail::Site* const* begin, detail::Site* const* end) noexcept;
  void (*unregister_sites)(detail::Site* const* begin, detail::Site* const* end) noexcept;
  detail::Writer* (*writer)() noexcept;  // the owning copy's view of the calling thread
  abi::ThreadSlot* busy_slot;
  abi::ThreadSlot* unclaimed_slot;
};
extern const RuntimeApi g_this_api;
// Set once, when this copy found another copy already running in this image.
extern const RuntimeApi* g_forward;
// The runtime that owns this image's segment, if another copy does (checked at start).
const RuntimeApi* find_runtime_of_this_image(pid_t pid);
// reserve_slow of a forwarding copy.
uint64_t forward_reserve(const RuntimeApi& to, uint32_t bytes, abi::ThreadSlot* slot) noexcept;

// Installs the fatal-signal handler that marks the segment crashed (crash_handler.cc).
void install_crash_handler();

// True in the shared runtime, which is never unloaded (-z nodelete): at exit its control
// thread may simply be left to the end of the process. False in the static library, which a
// plugin may carry and dlclose. Defined by resident_shared.cc or resident_static.cc.
extern const bool kRuntimeNeverUnloaded;

// Thread-exit destructor of a claimed ring: marks the slot exited (readable until reused).
void release_ring(void* slot);

// The trigger's part of the slow path (trigger_runtime.cc): whether a record may be reserved
// now. kAllow: as usual; kWindow: inside a fired trigger's window (counted; the writer must
// keep taking the slow path); kDeny: frozen (or the window just ended): drop, not counted.
enum class TriggerGate { kAllow, kWindow, kDeny };
TriggerGate trigger_gate() noexcept;
// True while a trigger has fired or frozen the rings: a writer that just set its slot's
// check must set it back to 0 (see ring_writer.cc).
bool trigger_active() noexcept;
// Sends every writer through the slow path for its next record (zeroes each active slot's
// check): a trigger firing, and the control thread's renewal of old blocks.
void zero_every_check(Runtime& rt);

// Points of the firing protocol (trigger_runtime.cc) where a test pauses a thread, to force
// the interleavings a descheduled thread makes (tests/runtime/trigger_race_test.cc,
// tests/duration/race_test.cc, and trigger_lag --inject).
enum class TriggerHookPoint : int {
  kNone,
  kFiringAnnounced,  // a matching writer announced its firing, before completing it
  kGateSawFiring,    // a writer's slow path saw a firing, before helping complete it
  kGateEndsWindow,   // a writer's slow path found the window over, before freezing
  kMatchStamped,     // a completion stamped the matching record, before opening the window
  kSlowPairFound,    // a duration trigger's writer found a slow pair, before taking the token
  kDurationBegin,    // a duration trigger's writer has a begin record, before opening it
  kCount
};
// Called at each of those points when set: null in a traced program, where it costs one load
// on those paths alone, none of them an ordinary record's.
extern std::atomic<void (*)(TriggerHookPoint)> g_trigger_test_hook;

}  // namespace nanotrace::runtime
