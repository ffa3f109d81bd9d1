// The writers' check of each record of an armed call site (enable byte 2), made before the
// record is published: special_event() hands it to a duration trigger's pairing
// (duration_runtime.cc) or tests it against a record trigger's expression, and a match fires
// the trigger (the firing protocol: trigger_runtime.cc). Records of other sites never come here.
#include <atomic>
#include <string_view>

#include "nanotrace/detail/record_layout.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/duration_runtime.hpp"
#include "runtime/own_record.hpp"
#include "runtime/runtime.hpp"
#include "runtime/trigger_state.hpp"

namespace nanotrace::detail {
namespace {

// A record trigger's test of a record of one of its sites, armed in `state`. Not inlined into
// special_event: its decoding buffers and saved registers would be every duration trigger's
// record's cost too.
[[gnu::noinline]] void match_record(const Site& site, uint64_t* record, uint64_t state) noexcept {
  using runtime::Runtime;
  // Decode the record just written (it is not published yet) and test the expression. It is
  // this thread's own record, of the site's layout: its bytes are trusted.
  FieldValue values[abi::kMaxFields];
  runtime::decode_own_record(site, record, values);
  const Runtime::ArmedTrigger* armed = runtime::g_armed.load(std::memory_order_acquire);
  if (armed == nullptr) return;
  auto it = armed->fields.find(&site);
  if (it == armed->fields.end() || !armed->expression.matches(it->second, values)) return;
  if (!runtime::take_fire_token(state)) return;  // another fired, or the trigger changed
  runtime::fire(Runtime::instance(), *armed, site, record, state);
}

}  // namespace

bool special_event(const Site& site, uint64_t* record) noexcept {
  using runtime::Runtime;
  if (const runtime::RuntimeApi* owner = runtime::g_forward) {
    return owner->special_event(site, record);
  }
  const uint64_t state = runtime::g_state.load(std::memory_order_acquire);
  // After the trigger fired, the slow path accounts for every record; this one was
  // reserved (inside the window, or just before the switch) and is published.
  if (runtime::phase_of(state) != runtime::kArmedPhase) return true;
  if (const Runtime::ArmedTrigger* armed = runtime::g_armed.load(std::memory_order_acquire);
      armed != nullptr && armed->duration != nullptr) {
    runtime::duration_record(*armed, site, record, state);  // pairs it; may fire
  } else {
    match_record(site, record, state);  // may fire
  }
  return true;  // the record itself is kept (a match's too)
}

}  // namespace nanotrace::detail
