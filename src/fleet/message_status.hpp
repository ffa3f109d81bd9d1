// A node's answer to `fleet status`: its broker link, armed trigger, rounds and counters, each
// traced process's rings and trigger, its clock's sync, and with the options that add them,
// its kernel capture and its shipping into ClickHouse. docs/fleet.md, "Messages", is its
// schema: the fields of the first agent are required, those added since optional.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

class FieldReader;

struct ProcessStatus {
  uint32_t pid = 0;
  std::string name;
  std::string trigger;     // the trigger's state: none, armed, fired, frozen
  std::string expression;  // the armed or fired trigger's
  uint64_t threads = 0;
  uint64_t records = 0;
  double history_seconds = 0;
  uint64_t overwritten_bytes = 0;
  uint64_t lost = 0;  // records lost, every cause

  nlohmann::json json_value() const;
  void read(FieldReader& fields);
};

// The clock-sync daemon's view, as the agent last read it.
struct ClockStatus {
  std::string source = "unknown";  // chrony, ptp4l, unknown
  bool synchronised = false;
  int64_t offset_ns = 0;
  bool bound_known = false;  // false: null in JSON
  uint64_t bound_ns = 0;
  std::string reference;

  nlohmann::json json_value() const;
  void read(FieldReader& fields);
};

// agent --kernel: the groups asked, and the instance or why there is none.
struct KernelStatus {
  std::vector<std::string> groups;
  std::string instance;
  std::string error;

  nlohmann::json json_value() const;
  void read(FieldReader& fields);
};

// agent --ship-clickhouse: what the shipper did.
struct ShipStatus {
  uint64_t servers = 0;
  std::string database;
  uint64_t shipped = 0, already_stored = 0, events = 0, failures = 0, rejected = 0, queued = 0;
  std::string last_error;
  uint64_t last_error_realtime_ns = 0, last_success_realtime_ns = 0;

  nlohmann::json json_value() const;
  void read(FieldReader& fields);
};

struct StatusAnswer {
  static constexpr const char* kWhat = "status answer";
  std::string node;
  std::string error;  // the node refused the command: nothing else is set
  bool connected = false;
  std::vector<ProcessStatus> processes;
  std::string armed;  // the armed expression, "" if none
  uint64_t before_ns = 0, rate_ns = 0;
  uint64_t rounds = 0, coalesced = 0, rate_limited = 0, local_only = 0;
  uint64_t last_latency_ns = 0;  // match to this node's freeze, last round
  std::optional<ClockStatus> clock;
  std::optional<KernelStatus> kernel;
  std::optional<ShipStatus> ship;

  std::string to_json() const;
  nlohmann::json json_value() const;
  void read(FieldReader& fields);
  static Result<StatusAnswer> parse(const std::string& json);
};

}  // namespace nanotrace::fleet
