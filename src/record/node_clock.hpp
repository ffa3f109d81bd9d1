// The NODE chunk every snapshot and recording ends with (base/node_meta.hpp): the machine's
// identity, clock <-> CLOCK_REALTIME pairs taken now, the clock-sync daemon's view of the
// error and the trigger that fired, so that `nanotrace merge` can put several machines' files
// on one timeline. Internal header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/node_identity.hpp"
#include "base/node_meta.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"
#include "record/clock_sync.hpp"
#include "record/file_writer.hpp"

namespace nanotrace::rec {

// The NODE payload of a file holding `processes` (process index = position; the first sets the
// clock kind and rate): identity, 8 bracketed clock pairs taken now, clock sync, and the first
// of the processes whose trigger fired (from its segment header, as it is now). sync: the
// clock-sync daemon's view if the caller holds a recent one (a fleet agent asks every 10 s
// on a thread of its own), else it is asked now (a client run: a millisecond or two of CPU).
// node: who this machine is, if the caller named it (a fleet agent's node), else
// sys::node_identity().
file::NodePayload node_payload(const std::vector<const Trace*>& processes,
                               const ClockSync* sync = nullptr,
                               const sys::NodeIdentity* node = nullptr);

// Appends it as a NODE chunk.
Status write_node_chunk(FileWriter& out, const std::vector<const Trace*>& processes,
                        const ClockSync* sync = nullptr, const sys::NodeIdentity* node = nullptr);
inline Status write_node_chunk(FileWriter& out, const Trace& trace) {
  return write_node_chunk(out, std::vector<const Trace*>{&trace});
}

}  // namespace nanotrace::rec
