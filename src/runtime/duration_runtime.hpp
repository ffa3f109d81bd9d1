// Duration triggers in the traced process (`io:submit..io:complete by req > 5ms`, `... open >
// 50ms`): arming one marks the call sites of its begin and end events (enable byte 2), so
// special_event() hands each of their records to duration_record() before it is published.
// A begin record opens an operation in a bounded table keyed by the key field; an end record
// closes it, and a pair longer than the threshold fires the trigger on the end record, the
// exact freeze of a record trigger. The control thread ages the table on a deadline (the
// oldest operation's begin plus the threshold) and fires on an operation still open past it,
// naming its begin record; it also turns the recent pairs' histograms into a relative
// threshold, and publishes the counts in the segment header (abi::DurationFacts).
//
// Records of events the trigger does not name never come here (their sites keep byte 1).
// Internal header.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "base/trigger_pairing.hpp"
#include "nanotrace/detail/fields.hpp"
#include "nanotrace/trigger.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {

// The pairing's mutable state, kept when the trigger is bound again to a module loaded later.
struct DurationState;

struct DurationPairing {
  // One call site of the begin or end event: where its records carry the key.
  struct Role {
    const detail::Site* site = nullptr;
    bool begin = false;
    int key_word = -1;  // the key's word in the record (a scalar key after scalars only), or -1
    std::vector<uint32_t> key_fields;  // else: the key's fields, decoded
    bool key_hashed = false;  // a string or several fields: the key is a hash of their bytes
  };
  DurationRule rule;
  std::vector<Role> roles;
  // By site id, 1 + the site's index in roles (0: none). A program has many call sites of one
  // event (the benchmark 15): looking each record's up in order cost a fifth of its pairing.
  std::vector<uint16_t> role_by_id;
  // The role of a record's site, or null if the trigger does not name it. Inline: every
  // begin and end record asks.
  const Role* role_of(const detail::Site& site) const {
    if (site.id < role_by_id.size() && role_by_id[site.id] != 0) {
      const Role& r = roles[role_by_id[site.id] - 1];
      if (r.site == &site) return &r;
    }
    return role_in_order(site);  // ids are given again when the segment is rebuilt
  }
  const Role* role_in_order(const detail::Site& site) const;
  // Never freed (a thread may still be in it): retired, its memory goes back to the system.
  DurationState* state = nullptr;
};

// What trigger_runtime.cc offers the pairing to fire with: the trigger's state word (its round
// and phase) as a match saw it, the token, the firing. A match acts only on the state it saw:
// a writer descheduled past a re-arm, resume or disarm never fires the next round.
uint64_t trigger_state_seen() noexcept;
// Takes the right to fire for a match seen in `armed_state` (an armed phase); false if it is
// not armed, a firing holds the token, or the state changed since. REQUIRES after true: a
// fire_on_* call with the same state, or give_back_fire_token().
bool take_fire_token(uint64_t armed_state) noexcept;
void give_back_fire_token() noexcept;
// REQUIRES: the token. Fires on the calling thread's unpublished `record` of `site`.
void fire_on_record(const Runtime::ArmedTrigger& armed, const detail::Site& site, uint64_t* record,
                    uint64_t armed_state) noexcept;
// A record published earlier by any thread: the match of a stuck trigger.
struct EarlierRecord {
  uint16_t event = 0;
  uint32_t tid = 0;
  uint32_t slot = 0;
  uint64_t seq = 0;
  // A stuck operation's begin: its age in the duration facts is then given as of the firing's
  // stamp, so that the stamp minus the begin is the age (the scan that found it may be a
  // descheduled millisecond earlier).
  uint64_t begin_ticks = 0;
};
// REQUIRES: the token. Fires with `match` as the matching record, stamped now.
void fire_on_earlier_record(const Runtime::ArmedTrigger& armed, const EarlierRecord& match,
                            uint64_t armed_state) noexcept;

// REQUIRES: rt.mu held. The duration trigger bound to the registered sites of its begin and
// end events (an error naming an unknown event or a key field an event lacks), not armed.
Result<const Runtime::ArmedTrigger*> bind_duration_trigger_locked(Runtime& rt, Trigger trigger,
                                                                  uint64_t after_events,
                                                                  uint64_t after_ns);
// REQUIRES: rt.mu held. `next` binds the same trigger again (a module loaded since): it keeps
// the open operations and counts of `previous`.
void adopt_duration_state_locked(const Runtime::ArmedTrigger& previous,
                                 const Runtime::ArmedTrigger& next);
// REQUIRES: rt.mu held. `armed` is being replaced by `next` (or none): its table's memory goes
// back to the system unless `next` adopted it (threads still in it for a moment find it
// empty).
void retire_duration_locked(const Runtime::ArmedTrigger& armed, const Runtime::ArmedTrigger* next);
// REQUIRES: rt.mu held, the token (a resume). The pairing starts afresh: operations open at
// the freeze are forgotten, since their end records may have been dropped while frozen.
void restart_duration_locked(Runtime& rt, const Runtime::ArmedTrigger& armed);

// The hot path's part (from special_event): pairs `record` of `site`, a begin or end site of
// the armed duration trigger, and fires if it completes a slow pair. `armed_state`: the
// trigger's state (round and phase) when the record was tested. Hidden: special_event calls it
// directly, not through the PLT.
[[gnu::visibility("hidden")]] void duration_record(const Runtime::ArmedTrigger& armed,
                                                   const detail::Site& site, uint64_t* record,
                                                   uint64_t armed_state) noexcept;

// REQUIRES: rt.mu held (the control thread). Ages the open operations (fires on a stuck one),
// moves a relative threshold's window on and publishes the counts. Returns how soon (ns) it
// wants to run again; kNoDurationWork without a duration trigger.
inline constexpr uint64_t kNoDurationWork = ~uint64_t{0};
uint64_t duration_control_pass(Runtime& rt);
// REQUIRES: rt.mu held. Publishes a duration trigger's counts and open operations now (at
// exit: the last pass may be up to 100 ms old).
void publish_duration_counts_locked(Runtime& rt);

}  // namespace nanotrace::runtime
