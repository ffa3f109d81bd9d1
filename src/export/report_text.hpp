// Text helpers of the HTML report (report_html.cc and its charts): trace text made safe as
// HTML, durations for people, and the colour palettes the legend explains.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nanotrace::report {

// Text from the trace as HTML text (also valid inside a quoted attribute): valid UTF-8,
// control characters shown as escapes (as `nanotrace dump` prints them), markup characters
// as entities. max_bytes > 0 cuts the text (at a character boundary, before escaping to
// entities) and ends it with "...".
std::string html(std::string_view raw, size_t max_bytes = 0);

// "850 ns", "12.5 us", "3.2 ms", "1.25 s".
std::string duration(uint64_t ns);

// Colours of events (records lanes) and of pair rules (pairs lanes): distinct palettes, so
// that a lane's colour never means both. kOtherEvent: events past the palette.
inline constexpr int kEventColors = 9;
const char* event_color(int index);  // index < 0 or >= kEventColors: kOtherEvent
inline constexpr const char* kOtherEvent = "#9a9a9a";
const char* rule_color(size_t index);

}  // namespace nanotrace::report
