// What the machine's clock-sync daemon says of CLOCK_REALTIME's error, recorded beside a
// trace (the NODE chunk): chrony (`chronyc -c -n tracking`) or, without it, ptp4l (`pmc`
// TIME_STATUS_NP). Internal header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/node_meta.hpp"

namespace nanotrace::rec {

struct ClockSync {
  file::SyncSource source = file::SyncSource::kUnknown;
  bool synchronised = false;
  int64_t offset_ns = 0;  // chrony: system time's offset from NTP time; ptp4l: from the master
  uint64_t root_delay_ns = 0;
  uint64_t root_dispersion_ns = 0;
  uint64_t bound_ns = file::kUnknownBound;  // the clock's error against true time
  std::string reference;                    // chrony: the reference's name; ptp4l: "ptp4l"
};

// Asks chrony (its command socket: NANOTRACE_CHRONY_SOCKET, else chronyc's default), then ptp4l,
// each given at most timeout_ms to answer; unknown if neither does.
ClockSync read_clock_sync(int timeout_ms = 500);

// Parsers of the daemons' answers (nullopt if the text is not one). chrony's bound is
// |offset| + root dispersion + root delay / 2 (chrony's own estimate of the maximum error);
// ptp4l's is |master_offset| while a grandmaster is present.
std::optional<ClockSync> parse_chrony_tracking(const std::string& csv_line);
std::optional<ClockSync> parse_pmc_time_status(const std::string& text);

}  // namespace nanotrace::rec
