// The answer to the fleet's `top` command: the node's latest live frame (live/live_view.hpp:
// its traced processes' rates, latency per pair rule, operations in flight oldest first,
// losses), as the agent's live view sampled it. `nanotrace fleet top` merges the nodes'
// operations in flight, oldest first. docs/fleet.md, "Messages", is its schema; the frame's is
// docs/reference/top.md, "JSON".
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "live/live_view.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

class FieldReader;

struct TopAnswer {
  static constexpr const char* kWhat = "top answer";
  std::string node;
  std::string error;  // e.g. the agent runs without a live view (--live-interval 0)
  live::LiveFrame frame;

  std::string to_json() const;
  nlohmann::json json_value() const;
  void read(FieldReader& fields);
  static Result<TopAnswer> parse(const std::string& json);
};

// The answer for frame, fitted under the broker's bound on a message: past it, the frame's
// per-event rates are left out (a note says so), then its operations in flight are cut.
std::string top_answer(const std::string& node, live::LiveFrame frame);

}  // namespace nanotrace::fleet
