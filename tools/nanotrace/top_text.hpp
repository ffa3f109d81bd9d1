// The text of a `nanotrace top` frame: the lines the terminal view draws and `top --once`
// prints. Strings from the traced processes are escaped (utf8::escape_text), so a field
// cannot move the cursor or forge a line.
#pragma once

#include <string>
#include <vector>

#include "live/live_view.hpp"

namespace nanotrace::cli {

enum class TopSort { kRate, kName };

struct TopLayout {
  int width = 0;  // columns; 0: lines are not cut
  int rows = 0;   // lines; 0: every process, rule, waiter and event
  bool paused = false;
  bool waiters_only = false;  // the long-waiters list alone
  TopSort sort = TopSort::kRate;
  double every_s = 1;  // the refresh interval asked for
};

struct TopLine {
  std::string text;
  bool heading = false;  // a section's column titles
};

std::vector<TopLine> render_top(const live::LiveFrame& frame, const TopLayout& layout);

}  // namespace nanotrace::cli
