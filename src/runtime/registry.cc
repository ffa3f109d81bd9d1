// Call-site registration and the runtime's lifecycle: the segment is created when the first
// module registers its sites (static initialisation; in a fork child, on its first event),
// every site is published into the segment's event table, and site enable flags follow the
// segment's group table. Modules unregister their sites when unloaded. Also the public
// control API (nanotrace/control.hpp), process exit and fork.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/process.hpp"
#include "nanotrace/control.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/duration_runtime.hpp"
#include "runtime/enum_fields.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

void on_exit_handler();
void on_fork_prepare() { Runtime::instance().mu.lock(); }
void on_fork_parent() { Runtime::instance().mu.unlock(); }
void on_fork_child() {
  Runtime& rt = Runtime::instance();
  detail::t_runtime_io = true;  // closing the parent's segment is the runtime's own I/O
  rt.after_fork_in_child();
  detail::t_runtime_io = false;
  rt.mu.unlock();
}

// Identity of a call site's descriptor, so a module loaded again gets its old event ids.
std::string descriptor_key(const detail::Site* site) {
  std::string key = std::string(site->group) + '\0' + site->name + '\0' + site->format + '\0' +
                    site->file + '\0' + std::to_string(site->line) + '\0' +
                    std::to_string(site->is_guard);
  for (uint32_t f = 0; f < site->field_count; ++f) key += static_cast<char>(site->types[f]);
  return key;
}

// Warns once about a NANOTRACE_GROUPS that enables no group this program has.
void warn_if_groups_name_nothing(const Runtime& rt) {
  if (rt.groups.empty() || std::getenv("NANOTRACE_GROUPS") == nullptr) return;
  for (const std::string& g : rt.groups) {
    if (group_enabled_by_spec(rt.config.groups, g)) return;
  }
  std::string known;
  for (const std::string& g : rt.groups) known += (known.empty() ? "" : ", ") + g;
  std::fprintf(stderr,
               "nanotrace: NANOTRACE_GROUPS=%s enables none of this program's groups (%s); "
               "tracing is off until a group is enabled\n",
               rt.config.groups.c_str(), known.c_str());
}

// Stops the control thread before the code it runs may be unmapped (this runtime being part
// of a module that is unloaded) and at exit. A runtime that is never unloaded does not wait
// for the thread to end: on a loaded machine that wait is a trip through the scheduler
// (milliseconds added to every traced process's exit), and the process ends it anyway.
std::atomic<Runtime*> g_runtime{nullptr};
struct ControlThreadStopper {
  ~ControlThreadStopper() {
    if (Runtime* rt = g_runtime.load(std::memory_order_acquire)) {
      rt->stop_control_thread(/*wait=*/!kRuntimeNeverUnloaded);
    }
  }
};
ControlThreadStopper g_control_thread_stopper;

}  // namespace

void report(const Status& s) {
  if (!s.ok()) std::fprintf(stderr, "nanotrace: tracing disabled: %s\n", s.message().c_str());
}

Runtime& Runtime::instance() {
  // Never destroyed: threads may still record events while static destructors run.
  static Runtime* rt = [] {
    auto* r = new Runtime();
    r->config = config_from_environment();
    pthread_key_create(&r->exit_key, release_ring);
    pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
    std::atexit(on_exit_handler);
    g_runtime.store(r, std::memory_order_release);
    return r;
  }();
  return *rt;
}

Status Runtime::start_locked() {
  // Creating the segment is the runtime's I/O, whichever thread does it.
  const bool was_runtime_io = detail::t_runtime_io;
  detail::t_runtime_io = true;
  struct Restore {
    bool value;
    ~Restore() { detail::t_runtime_io = value; }
  } restore{was_runtime_io};
  pid = getpid();
  // Another copy of the runtime already owns this image's segment: forward to it.
  if (const RuntimeApi* owner = find_runtime_of_this_image(pid)) {
    g_forward = owner;
    if (!sites.empty()) owner->register_sites(sites.data(), sites.data() + sites.size());
    return Status::Ok();
  }
  detail::g_clock_is_tsc = !config.force_monotonic && sys::tsc_is_invariant();
  auto seg = create_segment(config, pid);
  if (!seg.ok()) {
    start_failed = true;
    return seg.status();
  }
  segment = std::move(seg.value());
  forget_freeze_requests();  // a new segment's freeze_seq starts at 0
  rings_claimed.store(0, std::memory_order_relaxed);
  slots_used_bound.store(0, std::memory_order_relaxed);
  ready_free_slots.store(0, std::memory_order_relaxed);
  groups.clear();
  for (detail::Site* site : sites) publish_site_locked(site);
  started.store(true, std::memory_order_release);
  apply_groups_locked();
  warn_if_groups_name_nothing(*this);
  arm_from_environment_locked();
  if (config.crash_handler) install_crash_handler();
  start_control_thread();
  return Status::Ok();
}

bool Runtime::ensure_started() {
  // May run in a signal handler on a thread that holds the mutex: never wait for it forever.
  std::unique_lock lock(mu, std::defer_lock);
  for (int i = 0; i < 1000 && !lock.try_lock(); ++i) std::this_thread::yield();
  if (!lock.owns_lock()) return false;
  if (started.load(std::memory_order_acquire)) return true;
  if (start_failed) return false;
  report(start_locked());
  return started.load(std::memory_order_acquire);
}

void Runtime::publish_site_locked(detail::Site* site) {
  abi::SegmentHeader* h = segment.header();
  uint32_t group = 0;
  for (; group < groups.size(); ++group) {
    if (groups[group] == site->group) break;
  }
  if (group == groups.size()) {
    if (group >= abi::kMaxGroups) return;  // stays disabled: more groups than the table holds
    groups.emplace_back(site->group);
    auto* g = reinterpret_cast<abi::GroupEntry*>(segment.base + h->groups_offset) + group;
    std::memset(g, 0, sizeof(*g));
    std::strncpy(g->name, site->group, sizeof(g->name) - 1);
    g->enabled = group_enabled_by_spec(config.groups, site->group) ? 1 : 0;
    __atomic_store_n(&h->groups_count, group + 1, __ATOMIC_RELEASE);
  }
  // A module unloaded and loaded again: its sites keep their events (and ids).
  std::string key = descriptor_key(site);
  if (auto it = retired_ids.find(key); it != retired_ids.end()) {
    site->id = it->second;
    retired_ids.erase(it);
    return;
  }
  uint32_t index = h->events_count;
  if (index >= h->events_capacity || index >= 0xfffe) return;  // table full: site stays off
  uint64_t entry = h->events_offset + uint64_t{index} * sizeof(abi::EventEntry);
  if (!reserve_table_bytes(&segment, entry, entry + sizeof(abi::EventEntry))) {
    return;  // /dev/shm full: site stays off
  }
  auto* e = reinterpret_cast<abi::EventEntry*>(segment.base + h->events_offset) + index;
  std::memset(e, 0, sizeof(*e));
  e->group = group;
  e->name = intern_string(segment, site->name);
  e->format = intern_string(segment, site->format);
  e->file = intern_string(segment, site->file);
  e->line = site->line;
  e->field_count = site->field_count;
  e->reserved[0] = site->is_guard;
  // Field names come from the format: the identifier before each "={}".
  const char* f = site->format;
  uint32_t field = 0;
  for (size_t i = 0; f[i] != '\0' && field < site->field_count; ++i) {
    if (f[i] != '{' || i == 0 || f[i - 1] != '=') continue;
    size_t end = i - 1, start = end;
    while (start > 0 && (std::isalnum(static_cast<unsigned char>(f[start - 1])) ||
                         f[start - 1] == '_' || f[start - 1] == '.')) {
      --start;
    }
    char name[64] = {};
    size_t n = end - start < sizeof(name) - 1 ? end - start : sizeof(name) - 1;
    std::memcpy(name, f + start, n);
    e->field_names[field] = intern_string(segment, name);
    e->field_types[field] = static_cast<uint8_t>(site->types[field]);
    ++field;
  }
  publish_enum_names_locked(segment, *site, e);
  site->id = static_cast<uint16_t>(index + 1);
  __atomic_store_n(&h->events_count, index + 1, __ATOMIC_RELEASE);
}

void Runtime::apply_groups_locked() {
  if (!started.load(std::memory_order_relaxed)) return;
  abi::SegmentHeader* h = segment.header();
  auto* table = reinterpret_cast<abi::GroupEntry*>(segment.base + h->groups_offset);
  for (detail::Site* site : sites) {
    bool on = false;
    for (uint32_t g = 0; site->id != 0 && g < groups.size(); ++g) {
      if (groups[g] == site->group) {
        on = __atomic_load_n(&table[g].enabled, __ATOMIC_RELAXED) != 0;
        break;
      }
    }
    __atomic_store_n(&site->enabled, site_state_locked(site, on), __ATOMIC_RELAXED);
  }
}

Status Runtime::restart_locked() {
  for (detail::Site* site : sites) {
    __atomic_store_n(&site->enabled, 0, __ATOMIC_RELAXED);
    site->id = 0;
  }
  retired_ids.clear();
  if (started.load(std::memory_order_relaxed)) {
    started.store(false, std::memory_order_release);
    destroy_segment(&segment, true);
  }
  start_failed = false;
  return start_locked();
}

void Runtime::move_segment_fd_from(int fd) {
  std::lock_guard lock(mu);
  if (!started.load(std::memory_order_acquire) || segment.fd != fd) return;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
  if (moved >= 0) __atomic_store_n(&segment.fd, moved, __ATOMIC_RELEASE);
}

namespace {

// Marks the segment exited (and removes it unless asked to keep it) without waiting for
// anyone: an attached recorder keeps reading through its own descriptor and sees the
// process end through its pidfd.
void on_exit_handler() {
  Runtime& rt = Runtime::instance();
  std::lock_guard lock(rt.mu);
  if (!rt.started.load(std::memory_order_acquire) || rt.pid != getpid()) return;
  abi::SegmentHeader* h = rt.segment.header();
  refresh_clock(h);                    // the final pair: the longest baseline for the tick rate
  publish_duration_counts_locked(rt);  // a duration trigger's final counts
  __atomic_store_n(&h->state, static_cast<uint32_t>(abi::ProcessState::kExited), __ATOMIC_RELEASE);
  if (!rt.config.keep_on_exit) ::unlink(rt.segment.path.c_str());
}

}  // namespace

void Runtime::after_fork_in_child() {
  // Only resets state (the child may be about to exec): the child's segment is created on
  // its first event. The parent's mapping and descriptor are dropped so the child neither
  // keeps the parent's segment alive nor writes into it.
  detail::t_writer = detail::Writer{nullptr, 0, &detail::g_unclaimed_slot, nullptr};
  pthread_setspecific(exit_key, nullptr);
  control_thread_running = false;  // threads do not survive fork
  self_stat.close_if_ours();
  control_stop.store(false, std::memory_order_relaxed);
  reset_trigger_after_fork();
  consumer_seen.store(false, std::memory_order_relaxed);  // the child's segment is its own
  if (started.load(std::memory_order_relaxed)) {
    started.store(false, std::memory_order_release);
    destroy_segment(&segment, /*unlink=*/false);
  }
  start_failed = false;
  any_ring_claimed.store(false, std::memory_order_relaxed);
  rings_claimed.store(0, std::memory_order_relaxed);
  slots_used_bound.store(0, std::memory_order_relaxed);
  ready_free_slots.store(0, std::memory_order_relaxed);
  retired_ids.clear();
  // Sites keep their enable bytes, so the child's first event reaches the slow path, which
  // starts the runtime; their ids are assigned again in the child's own segment.
}

}  // namespace nanotrace::runtime

namespace nanotrace::detail {

bool register_sites(Site* const* begin, Site* const* end) noexcept {
  if (const runtime::RuntimeApi* owner = runtime::g_forward)
    return owner->register_sites(begin, end);
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  bool started = rt.started.load(std::memory_order_relaxed);
  for (Site* const* p = begin; p && p < end; ++p) {
    Site* site = *p;
    if (site == nullptr || !rt.known_sites.insert(site).second) continue;
    rt.sites.push_back(site);
    if (started) rt.publish_site_locked(site);
  }
  if (!started && !rt.start_failed && rt.pid == 0) {
    runtime::report(rt.start_locked());
    if (runtime::g_forward) {
      // From now on the owner keeps these sites; this copy keeps no registry.
      rt.sites.clear();
      rt.known_sites.clear();
    }
  } else if (started && !rt.config.trigger.empty() && !rt.armed) {
    rt.arm_from_environment_locked();  // its event may be in the module registered just now
  } else if (started && rt.armed) {
    rt.rebind_trigger_locked();  // the new module's sites may match it too
  } else {
    rt.apply_groups_locked();
  }
  return true;
}

void unregister_sites(Site* const* begin, Site* const* end) noexcept {
  if (const runtime::RuntimeApi* owner = runtime::g_forward)
    return owner->unregister_sites(begin, end);
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  bool any = false;
  for (Site* const* p = begin; p && p < end; ++p) {
    Site* site = *p;
    if (site == nullptr || rt.known_sites.erase(site) == 0) continue;
    any = true;
    // Its event entry stays in the segment, so its records stay readable.
    if (site->id != 0) rt.retired_ids.emplace(runtime::descriptor_key(site), site->id);
  }
  if (!any) return;
  std::erase_if(rt.sites, [&](Site* s) { return rt.known_sites.count(s) == 0; });
}

}  // namespace nanotrace::detail

namespace nanotrace {

Status configure(const Options& options) {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  runtime::Config next = rt.config;
  Status s = runtime::apply_options(options, &next);
  if (!s.ok()) return s;
  bool layout_changes = next.mode != rt.config.mode || next.ring_size != rt.config.ring_size ||
                        next.max_threads != rt.config.max_threads;
  if (layout_changes && rt.any_ring_claimed) {
    return Status::Busy("mode, buffer size and thread count must be set before the first event");
  }
  bool groups_change = next.groups != rt.config.groups;
  rt.config = next;
  bool started = rt.started.load(std::memory_order_relaxed);
  if (layout_changes || !started) return rt.restart_locked();
  abi::SegmentHeader* h = rt.segment.header();
  std::memset(h->user_name, 0, sizeof(h->user_name));
  std::memcpy(h->user_name, next.name.data(), next.name.size());
  h->block_timeout_ns = next.block_timeout_ns;
  if (groups_change) {
    auto* table = reinterpret_cast<abi::GroupEntry*>(rt.segment.base + h->groups_offset);
    for (uint32_t g = 0; g < rt.groups.size(); ++g) {
      table[g].enabled = runtime::group_enabled_by_spec(next.groups, rt.groups[g]) ? 1 : 0;
    }
    rt.apply_groups_locked();
  }
  return Status::Ok();
}

Status set_group_enabled(std::string_view group, bool enabled) {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  if (!rt.started.load(std::memory_order_relaxed)) {
    return Status::NotFound("tracing is not running");
  }
  abi::SegmentHeader* h = rt.segment.header();
  auto* table = reinterpret_cast<abi::GroupEntry*>(rt.segment.base + h->groups_offset);
  for (uint32_t g = 0; g < rt.groups.size(); ++g) {
    if (rt.groups[g] == group) {
      __atomic_store_n(&table[g].enabled, enabled ? 1 : 0, __ATOMIC_RELAXED);
      rt.apply_groups_locked();
      return Status::Ok();
    }
  }
  return Status::NotFound("no group named '" + std::string(group) + "'");
}

std::string segment_path() {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  return rt.started.load(std::memory_order_relaxed) ? rt.segment.path : std::string();
}

Mode mode() {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  return rt.config.mode;
}

}  // namespace nanotrace
