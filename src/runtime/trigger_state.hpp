// The trigger's state as its files share it: the state word (round and phase), the armed
// trigger, the token and the firing. trigger_runtime.cc defines them and runs the firing
// protocol (its opening comment describes it); trigger_match.cc is the writers' check of each
// record of an armed call site; trigger_control.cc arms, disarms and resumes. Hidden:
// special_event() reaches them with direct loads and calls (no GOT, no PLT), as when they
// were one file's. Internal header.
#pragma once

#include <atomic>
#include <cstdint>

#include "nanotrace/abi.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {

// TriggerState values, plus kFiring from the match until a thread takes the firing's
// completion (the switch of every writer), and kCompleting until it is done.
inline constexpr uint32_t kFiring = 4;
inline constexpr uint32_t kCompleting = 5;
inline constexpr uint32_t kNonePhase = static_cast<uint32_t>(abi::TriggerState::kNone);
inline constexpr uint32_t kArmedPhase = static_cast<uint32_t>(abi::TriggerState::kArmed);
inline constexpr uint32_t kFiredPhase = static_cast<uint32_t>(abi::TriggerState::kFired);
inline constexpr uint32_t kFrozenPhase = static_cast<uint32_t>(abi::TriggerState::kFrozen);

// The round (bumped by each arm, disarm and resume) in the high half, the phase in the low
// half: the low half is also a futex word (little-endian), waited on during a completion.
[[gnu::visibility("hidden")]] extern std::atomic<uint64_t> g_state;
constexpr uint32_t phase_of(uint64_t state) { return static_cast<uint32_t>(state); }
constexpr uint64_t with_phase(uint64_t state, uint32_t phase) {
  return (state & ~uint64_t{0xffffffff}) | phase;
}
inline uint32_t current_phase(std::memory_order order = std::memory_order_acquire) {
  return phase_of(g_state.load(order));
}

// The armed trigger as writers see it (Runtime::armed, published).
[[gnu::visibility("hidden")]] extern std::atomic<const Runtime::ArmedTrigger*> g_armed;

// The header's freeze_seq as of the last freeze on request (or resume): a writer that finds
// it changed freezes the rings.
[[gnu::visibility("hidden")]] extern std::atomic<uint32_t> g_freeze_seen;

// The right to fire is one token: a matching writer takes it, and so does the control side
// before it changes the trigger.
enum class Token { kOurs, kFiringDone, kStuck };
// REQUIRES: mu held (so no other controller-side change runs). Takes the token before the
// trigger changes. Held by a writer that matched: that firing is completed first (helped,
// or waited for: a writer holds the token for a few stores, unless it is descheduled, or
// gives it back if its round is over). kFiringDone: a firing holds it and is complete (the
// phase is fired or frozen); the caller may change the phase. kStuck: a writer holding it
// did not go on within about 2 s; nothing may change.
[[gnu::visibility("hidden")]] Token take_token(Runtime& rt);
// What a change refused for kStuck returns.
[[gnu::visibility("hidden")]] Status stuck_firing();
// REQUIRES: the token taken. A new round in `phase`; the token is given back last, so a
// writer that wins it next sees the new round.
[[gnu::visibility("hidden")]] void start_round(abi::SegmentHeader* h, abi::TriggerState phase);

// Fires the trigger for `record` (written, not yet published) of the calling thread.
// REQUIRES: the token taken by the caller in `armed_state` (so the state stays that).
[[gnu::visibility("hidden")]] void fire(Runtime& rt, const Runtime::ArmedTrigger& armed,
                                        const detail::Site& site, uint64_t* record,
                                        uint64_t armed_state);

}  // namespace nanotrace::runtime
