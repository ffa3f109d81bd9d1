// The answer to the fleet's `top` command (message_top.hpp).
#include "fleet/message_top.hpp"

#include <nlohmann/json.hpp>

#include "fleet/message_answers.hpp"
#include "fleet/message_fields.hpp"

namespace nanotrace::fleet {

using nlohmann::json;

json TopAnswer::json_value() const {
  if (!error.empty()) return error_answer_json(node, error);
  return {{"node", node}, {"frame", live::frame_json_value(frame)}};
}

std::string TopAnswer::to_json() const { return json_text(json_value()); }

void TopAnswer::read(FieldReader& r) {
  if (!read_answer_head(r, &node, &error)) return;
  const json* value = r.value("frame");
  if (value == nullptr) return;
  // The frame's own reader checks each member's type (it never throws either).
  auto f = live::parse_frame_json_value(*value);
  if (!f.ok()) return r.fail("frame", f.status().message());
  frame = std::move(*f);
}

Result<TopAnswer> TopAnswer::parse(const std::string& bytes) {
  return parse_answer<TopAnswer>(bytes, kWhat);
}

std::string top_answer(const std::string& node, live::LiveFrame frame) {
  // Room for the reply's framing beside the body.
  constexpr size_t kBound = kMaxMessageBytes - 4096;
  std::string body = TopAnswer{node, "", frame}.to_json();
  if (body.size() <= kBound) return body;
  frame.notes.push_back(std::to_string(frame.events.size()) +
                        " events' rates left out: the answer must fit in one broker message");
  frame.events.clear();
  for (;;) {
    body = TopAnswer{node, "", frame}.to_json();
    if (body.size() <= kBound || frame.waiters.empty()) return body;
    frame.waiters.resize(frame.waiters.size() / 2);
  }
}

}  // namespace nanotrace::fleet
