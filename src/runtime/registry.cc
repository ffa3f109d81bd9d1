// Call-site registration and the runtime's lifecycle: the segment is created when the first
// module registers its sites (static initialisation), every site is published into the
// segment's event table, and site enable flags follow the segment's group table. Also the
// public control API (nanotrace/control.hpp), process exit and fork.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nanotrace/control.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

void on_exit_handler();
void on_fork_prepare() { Runtime::instance().mu.lock(); }
void on_fork_parent() { Runtime::instance().mu.unlock(); }
void on_fork_child() {
  Runtime& rt = Runtime::instance();
  rt.mu.unlock();
  rt.after_fork_in_child();
}

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
    return r;
  }();
  return *rt;
}

Status Runtime::start_locked() {
  pid = getpid();
  detail::g_clock_is_tsc = !config.force_monotonic && tsc_is_invariant();
  auto seg = create_segment(config, pid);
  if (!seg.ok()) return seg.status();
  segment = *seg;
  started = true;
  groups.clear();
  for (detail::Site* site : sites) publish_site_locked(site);
  apply_groups_locked();
  if (!config.trigger.empty() && !armed) {
    Status s = arm_locked(config.trigger, config.trigger_after_events, config.trigger_after_ns);
    if (!s.ok()) std::fprintf(stderr, "nanotrace: NANOTRACE_TRIGGER: %s\n", s.message().c_str());
  }
  if (config.crash_handler) install_crash_handler();
  start_control_thread();
  return Status::Ok();
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
  uint32_t index = h->events_count;
  if (index >= h->events_capacity || index >= 0xfffe) return;  // table full: site stays off
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
  site->id = static_cast<uint16_t>(index + 1);
  __atomic_store_n(&h->events_count, index + 1, __ATOMIC_RELEASE);
}

void Runtime::apply_groups_locked() {
  if (!started) return;
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
  if (started) destroy_segment(&segment, true);
  started = false;
  return start_locked();
}

namespace {

void on_exit_handler() {
  Runtime& rt = Runtime::instance();
  std::lock_guard lock(rt.mu);
  if (!rt.started || rt.pid != getpid()) return;
  abi::SegmentHeader* h = rt.segment.header();
  // With a consumer attached, give it a bounded time to drain what is left.
  if (__atomic_load_n(&h->consumer_pid, __ATOMIC_ACQUIRE) != 0) {
    for (int i = 0; i < 500; ++i) {
      pid_t consumer = static_cast<pid_t>(__atomic_load_n(&h->consumer_pid, __ATOMIC_ACQUIRE));
      if (consumer == 0 || kill(consumer, 0) != 0) break;
      bool drained = true;
      for (uint32_t s = 0; s < h->max_threads; ++s) {
        abi::ThreadSlot* slot = rt.segment.slot(s);
        if (slot->state != static_cast<uint32_t>(abi::SlotState::kFree) &&
            __atomic_load_n(&slot->consumed, __ATOMIC_ACQUIRE) < slot->head) {
          drained = false;
          break;
        }
      }
      if (drained) break;
      usleep(10000);
    }
  }
  __atomic_store_n(&h->state, static_cast<uint32_t>(abi::ProcessState::kExited), __ATOMIC_RELEASE);
  if (!rt.config.keep_on_exit) shm_unlink(rt.segment.name.c_str());
}

}  // namespace

void Runtime::after_fork_in_child() {
  // The child shares the parent's mapping: forget it (without unlinking the parent's
  // segment) and start a segment of its own.
  detail::t_writer = detail::Writer{nullptr, 0, 0, &detail::g_unclaimed_slot};
  control_thread_running = false;  // threads do not survive fork
  std::lock_guard lock(mu);
  for (detail::Site* site : sites) __atomic_store_n(&site->enabled, 0, __ATOMIC_RELAXED);
  if (started) {
    munmap(segment.base, segment.size);
    close(segment.fd);
    segment = Segment();
    started = false;
  }
  any_ring_claimed = false;
  if (Status s = start_locked(); !s.ok()) {
    std::fprintf(stderr, "nanotrace: tracing disabled in child: %s\n", s.message().c_str());
  }
}

}  // namespace nanotrace::runtime

namespace nanotrace::detail {

bool register_sites(Site* const* begin, Site* const* end) noexcept {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  for (Site* const* p = begin; p && p < end; ++p) {
    Site* site = *p;
    if (site == nullptr || !rt.known_sites.insert(site).second) continue;
    rt.sites.push_back(site);
    if (rt.started) rt.publish_site_locked(site);
  }
  if (!rt.started) {
    runtime::report(rt.start_locked());
  } else if (!rt.config.trigger.empty() && !rt.armed) {
    // The trigger's event may live in a module registered just now.
    (void)rt.arm_locked(rt.config.trigger, rt.config.trigger_after_events,
                        rt.config.trigger_after_ns);
  } else {
    rt.apply_groups_locked();
  }
  return true;
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
  if (layout_changes || !rt.started) return rt.restart_locked();
  abi::SegmentHeader* h = rt.segment.header();
  std::memset(h->user_name, 0, sizeof(h->user_name));
  std::memcpy(h->user_name, next.name.data(), next.name.size());
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
  if (!rt.started) return Status::NotFound("tracing is not running");
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
  return rt.started ? "/dev/shm" + rt.segment.name : std::string();
}

Mode mode() {
  runtime::Runtime& rt = runtime::Runtime::instance();
  std::lock_guard lock(rt.mu);
  return rt.config.mode;
}

}  // namespace nanotrace
