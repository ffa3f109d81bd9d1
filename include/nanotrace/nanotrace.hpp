// nanotrace: always-on tracepoints into per-thread shared-memory rings.
//
// Quickstart
//   #include <nanotrace/nanotrace.hpp>
//   NANOTRACE(io, submit, "req={} offset={} len={}", id, off, len);
//   if (NANOTRACE_ENABLED(io)) { auto s = expensive(); NANOTRACE(io, detail, "s={}", s); }
//
// A tracepoint names a group, an event and a format whose "name={}" placeholders name the
// fields, one per argument; the argument count and types are checked at compile time.
// Fields are integers, enums, bool, float/double, pointers, and strings (const char*,
// std::string_view, std::string), kept up to abi::kMaxStringBytes bytes. Everything static
// about a call site (group, event, field names and types, file, line) is a constant
// descriptor registered at process start, so `nanotrace events PID` lists every call site
// before it runs, and the ring only receives the timestamp, the event id and the values.
//
// Cost: a disabled tracepoint is one byte load and one branch. An enabled one reads the
// time stamp counter and writes 8 bytes of header plus 8 per scalar field into the calling
// thread's ring: no lock, no atomic read-modify-write, no system call. Configuration (mode,
// buffer size, enabled groups) comes from nanotrace/control.hpp or the environment:
// NANOTRACE_MODE=overwrite|discard|block, NANOTRACE_BUFFER=<bytes per thread, K/M suffix>,
// NANOTRACE_GROUPS=io,sched (or "all", or "-io" to disable), NANOTRACE_NAME=<name>.
//
// Why macros: the call site's location and the format string must become a unique constant
// descriptor, and the disabled check must be a single load of that descriptor.
//
// Thread safety: any thread may hit any tracepoint at any time; each thread writes only its
// own ring.
#pragma once

#include <x86intrin.h>

#include <cstdint>

#include "nanotrace/abi.hpp"
#include "nanotrace/detail/fields.hpp"

namespace nanotrace::detail {

// The calling thread's view of its ring. `slot` is the slot its records go to: before the
// thread claims a ring it is a shared dummy whose check is 0, so the first event takes the
// slow path; while a record is being written it is a busy dummy (check 0 as well), so a
// tracepoint in a signal handler interrupting it takes the slow path, which drops and
// counts that nested record instead of overwriting the one in progress.
struct Writer {
  uint8_t* data;
  uint64_t mask;
  abi::ThreadSlot* slot;
  abi::ThreadSlot* owned;  // the thread's claimed slot, or null
};

extern constinit thread_local Writer t_writer __attribute__((tls_model("initial-exec")));
// True while the calling thread does the runtime's own work (the control thread always; any
// thread starting the runtime): an I/O interposer must not trace that thread's calls.
extern constinit thread_local bool t_runtime_io __attribute__((tls_model("initial-exec")));
extern constinit bool g_clock_is_tsc;
extern abi::ThreadSlot g_busy_slot;
inline constexpr uint64_t kNoSpace = ~uint64_t{0};

// Slow path (runtime/ring_writer.cc): claims a ring on the thread's first event, starts a
// new block, applies a fired trigger's window, waits or drops when the ring is full.
// `slot` is what the fast path found in t_writer.slot. Returns the head at which `bytes` may
// be written in t_writer.owned's ring, or kNoSpace when the record must be dropped (it has
// been counted).
uint64_t reserve_slow(uint32_t bytes, abi::ThreadSlot* slot) noexcept;
uint64_t monotonic_ticks() noexcept;
// For sites whose enable byte is 2 (watched by an armed trigger): called with the record
// written but not yet published; false means drop it (the rings are frozen).
bool special_event(const Site& site, uint64_t* record) noexcept;
bool register_sites(Site* const* begin, Site* const* end) noexcept;
void unregister_sites(Site* const* begin, Site* const* end) noexcept;

[[gnu::always_inline]] inline uint64_t now_ticks() {
  if (__builtin_expect(g_clock_is_tsc, 1)) return __rdtsc();
  return monotonic_ticks();
}

// One instruction, so a signal handler on this thread cannot interleave with it.
[[gnu::always_inline]] inline void count_record(abi::ThreadSlot* slot) {
  asm volatile("addq $1, %0" : "+m"(slot->written));
}

// emit and its helpers cannot throw (what they call is noexcept) yet are not declared
// noexcept: that would give every traced function an exception region, whose personality
// routine loads libstdc++ into programs that would not otherwise need it.
template <class... A>
[[gnu::always_inline]] inline void emit(const Site& site, const A&... args) {
  uint32_t bytes;
  if constexpr ((kIsString<std::remove_cvref_t<A>> || ...)) {
    bytes = (8 + ... + payload_bytes(args));
  } else {
    bytes = 8 * (1 + sizeof...(A));
  }
  const uint8_t state = __atomic_load_n(&site.enabled, __ATOMIC_RELAXED);
  Writer& w = t_writer;
  abi::ThreadSlot* slot = w.slot;
  w.slot = &g_busy_slot;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  uint64_t head = slot->head;
  // check may be zeroed by another thread (a trigger firing): an atomic load, a plain mov.
  if (__builtin_expect(head + bytes > __atomic_load_n(&slot->check, __ATOMIC_RELAXED), 0)) {
    head = reserve_slow(bytes, slot);
    if (head == kNoSpace) {
      w.slot = slot;
      return;
    }
    slot = w.owned;
  }
  auto* p = reinterpret_cast<uint64_t*>(w.data + (head & w.mask));
  p[0] = (now_ticks() << 16) | site.id;
  [[maybe_unused]] uint64_t* q = p + 1;
  ((q = store_field(q, args)), ...);
  if (__builtin_expect(state > 1, 0) && !special_event(site, p)) {
    w.slot = slot;
    return;
  }
  __atomic_store_n(&slot->head, head + bytes, __ATOMIC_RELEASE);
  count_record(slot);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  w.slot = slot;
}

// Pointers to every Site of this binary or shared object, placed by NANOTRACE_DETAIL_SITE.
extern "C" {
extern Site* const __start_nanotrace_sites[] __attribute__((weak, visibility("hidden")));
extern Site* const __stop_nanotrace_sites[] __attribute__((weak, visibility("hidden")));
}

// Each translation unit that includes this header registers its module's sites at static
// initialisation (duplicates are ignored), so shared objects and dlopen work too, and
// unregisters them when the module is unloaded (dlclose) or the process exits: the runtime
// then never touches a site whose memory may be gone.
// (Internal linkage on purpose: the section bounds are this module's own.)
namespace {
struct SiteRegistration {
  SiteRegistration() noexcept { register_sites(__start_nanotrace_sites, __stop_nanotrace_sites); }
  ~SiteRegistration() { unregister_sites(__start_nanotrace_sites, __stop_nanotrace_sites); }
};
[[maybe_unused]] const SiteRegistration kSiteRegistration;
}  // namespace

}  // namespace nanotrace::detail

// Declares the call site's constant descriptor and records its address in the
// "nanotrace_sites" section (the asm emits no instruction).
#define NANOTRACE_DETAIL_SITE(var, guard, group, event, fmt, ...)                                \
  using var##_types = decltype(::nanotrace::detail::type_list(__VA_ARGS__));                     \
  auto var##_tag = [] {                                                                          \
    ::nanotrace::detail::Site var##_value = ::nanotrace::detail::SiteBuilder<var##_types>::make( \
        #group, #event, fmt, __FILE__, __LINE__);                                                \
    var##_value.is_guard = guard;                                                                \
    return var##_value;                                                                          \
  };                                                                                             \
  auto& var = ::nanotrace::detail::SiteHolder<decltype(var##_tag)>::site;                        \
  asm volatile(                                                                                  \
      ".pushsection nanotrace_sites,\"aw\"\n\t.balign 8\n\t.quad %c0\n\t.popsection" ::"i"(&var))

// NANOTRACE(group, event, "a={} b={}", a, b): records one event with named, typed fields.
#define NANOTRACE(group, event, fmt, ...)                                                   \
  do {                                                                                      \
    static_assert(::nanotrace::detail::valid_identifier(#group),                            \
                  "nanotrace: group must be an identifier shorter than 32 characters");     \
    static_assert(::nanotrace::detail::valid_identifier(#event),                            \
                  "nanotrace: event must be an identifier shorter than 32 characters");     \
    static_assert(::nanotrace::detail::count_fields(fmt) >= 0,                              \
                  "nanotrace: the format must write each field as name={}");                \
    static_assert(::nanotrace::detail::count_fields(fmt) ==                                 \
                      decltype(::nanotrace::detail::type_list(__VA_ARGS__))::kSize,         \
                  "nanotrace: the format's name={} placeholders must match the arguments"); \
    static_assert(decltype(::nanotrace::detail::type_list(__VA_ARGS__))::kSize <=           \
                      ::nanotrace::abi::kMaxFields,                                         \
                  "nanotrace: at most 16 fields");                                          \
    NANOTRACE_DETAIL_SITE(nanotrace_site_, 0, group, event, fmt, __VA_ARGS__);              \
    if (__builtin_expect(__atomic_load_n(&nanotrace_site_.enabled, __ATOMIC_RELAXED), 0))   \
      ::nanotrace::detail::emit(nanotrace_site_ __VA_OPT__(, ) __VA_ARGS__);                \
  } while (0)

// NANOTRACE_ENABLED(group): true while the group is enabled; guards costly argument
// preparation. Also one load.
#define NANOTRACE_ENABLED(group)                                              \
  ([]() noexcept -> bool {                                                    \
    NANOTRACE_DETAIL_SITE(nanotrace_guard_, 1, group, enabled, "");           \
    return __atomic_load_n(&nanotrace_guard_.enabled, __ATOMIC_RELAXED) != 0; \
  }())
