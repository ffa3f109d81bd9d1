// HTML text, durations and palettes of the report (see report_text.hpp).
#include "export/report_text.hpp"

#include <fmt/format.h>

#include "base/utf8.hpp"

namespace nanotrace::report {

std::string html(std::string_view raw, size_t max_bytes) {
  std::string s = utf8::escape_text(raw);
  bool cut = false;
  if (max_bytes > 0 && s.size() > max_bytes) {
    size_t n = max_bytes;
    // Back to the first byte of a character: the escaped text is valid UTF-8.
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
    s.resize(n);
    cut = true;
  }
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  if (cut) out += "...";
  return out;
}

std::string duration(uint64_t ns) {
  if (ns < 1000) return fmt::format("{} ns", ns);
  if (ns < 1000000) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns < 1000000000) return fmt::format("{:.1f} ms", ns / 1e6);
  return fmt::format("{:.2f} s", ns / 1e9);
}

const char* event_color(int index) {
  static const char* kColors[kEventColors] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                              "#8c564b", "#e377c2", "#bcbd22", "#17becf"};
  return index >= 0 && index < kEventColors ? kColors[index] : kOtherEvent;
}

const char* rule_color(size_t index) {
  // Darker than the event colours: pairs lanes lie under records lanes.
  static const char* kColors[] = {"#08306b", "#7f2704", "#00441b", "#3f007d",
                                  "#67000d", "#014636", "#4d004b", "#252525"};
  return kColors[index % (sizeof(kColors) / sizeof(kColors[0]))];
}

}  // namespace nanotrace::report
