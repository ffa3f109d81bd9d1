// A round's manifest: what one node froze and copied for a fleet freeze (the origins, each
// process's snapshot file and freeze time, where the freeze's time went). The agent writes it
// into its spool (ROUND.NODE.json) and sends it as its answer to `fleet snapshot` and, with
// the others of its spool, to a collector's `rounds` (RoundsAnswer). docs/fleet.md, "Messages",
// is its schema: the fields of the first agent are required, those added since optional, so
// that an older agent's manifest reads.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fleet/protocol.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

class FieldReader;

// When this node passed each step of a fleet freeze (CLOCK_REALTIME ns, 0: not on this
// node's path), for the manifest's "timing": where a freeze's time goes, hop by hop. The origin
// fills woke to published, every other node received to requested; each process's own freeze
// time is its frozen_realtime_ns.
struct RoundTiming {
  uint64_t woke_ns = 0;       // origin: the watcher's futex_waitv returned
  uint64_t seen_ns = 0;       // origin: the watcher found the fired trigger
  uint64_t published_ns = 0;  // origin: the announcement handed to the broker's client
  uint64_t received_ns = 0;   // the announcement's delivery to this agent
  uint64_t handled_ns = 0;    // this agent acted on it
  uint64_t requested_ns = 0;  // every local process asked to freeze
  uint64_t copied_ns = 0;     // the copy began (after the agent's copy delay)

  nlohmann::json json_value() const;  // the steps passed (not 0) only
  void read(FieldReader& fields);
};

// One process of a round: its snapshot, or why there is none (error).
struct ManifestProcess {
  uint32_t pid = 0;
  std::string name;
  std::string file;  // ROUND.NODE.PID.nt in the node's spool ("" if none)
  uint64_t frozen_realtime_ns = 0;
  double history_seconds = 0;
  uint64_t bytes = 0, records = 0;
  // The kernel's window went into this snapshot (agent --kernel): its pages and lost events.
  bool has_kernel = false;
  uint64_t kernel_pages = 0, kernel_lost = 0;
  std::string error;  // not frozen, or the snapshot could not be written

  // A snapshot to copy: a file and no error.
  bool copied() const { return !file.empty() && error.empty(); }
  nlohmann::json json_value() const;
  void read(FieldReader& fields);
};

struct Manifest {
  std::string round;
  std::string node;
  std::string fleet;
  std::vector<Freeze> origins;      // the first, then freezes coalesced into the round
  uint64_t before_ns = 0;           // the history asked before the match
  uint64_t freeze_realtime_ns = 0;  // the node's last process frozen
  uint64_t latency_ns = 0;          // the first origin's match to that
  std::vector<ManifestProcess> processes;
  std::optional<RoundTiming> timing;

  // True if the manifest belongs to round: its own id or a coalesced origin's.
  bool names_round(const std::string& round) const;
  // The first origin's match (CLOCK_REALTIME ns), 0 if it has no origin.
  uint64_t match_realtime_ns() const;

  std::string to_json(int indent = -1) const;
  nlohmann::json json_value() const;
  void read(FieldReader& fields);
  static Result<Manifest> parse(const std::string& json);
};

}  // namespace nanotrace::fleet
