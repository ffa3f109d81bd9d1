// Runtime configuration: defaults, NANOTRACE_* environment variables, and Options from the
// API, in that order of precedence (the API wins).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/group_spec.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

constexpr uint32_t kMinRing = 64u << 10;
constexpr uint32_t kMaxRing = 1u << 30;

uint32_t round_up_pow2(uint64_t v) {
  uint64_t p = kMinRing;
  while (p < v) p <<= 1;
  return static_cast<uint32_t>(p);
}

// "4M", "512K", "1048576" -> bytes; 0 on error.
uint64_t parse_size(std::string_view text) {
  if (text.empty()) return 0;
  uint64_t mult = 1;
  char last = text.back();
  if (last == 'k' || last == 'K') mult = 1ull << 10;
  if (last == 'm' || last == 'M') mult = 1ull << 20;
  if (last == 'g' || last == 'G') mult = 1ull << 30;
  if (mult != 1) text.remove_suffix(1);
  if (text.empty() || text.size() > 12) return 0;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v * mult;
}

void warn(const char* var, const char* value, const char* expected, const char* in_effect) {
  std::fprintf(stderr, "nanotrace: ignoring %s=%s (expected %s); using %s\n", var, value, expected,
               in_effect);
}

// "100ms", "50us", "2s", "1500000ns", "0", "inf" -> nanoseconds; false on error.
bool parse_duration(std::string_view text, uint64_t* ns) {
  if (text == "inf" || text == "infinite") {
    *ns = kWaitForever;
    return true;
  }
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 12) return false;
  uint64_t v = std::strtoull(std::string(text.substr(0, digits)).c_str(), nullptr, 10);
  std::string_view unit = text.substr(digits);
  uint64_t mult = 0;
  if (unit == "ns") mult = 1;
  if (unit == "us") mult = 1000;
  if (unit == "ms" || (unit.empty() && v == 0)) mult = 1000000;
  if (unit == "s") mult = 1000000000;
  if (mult == 0) return false;
  *ns = v * mult;
  return true;
}

// "1", "0" (also "yes"/"no", "true"/"false", "on"/"off"); false if not understood.
bool parse_flag(std::string_view text, bool* value) {
  if (text == "1" || text == "yes" || text == "true" || text == "on") {
    *value = true;
    return true;
  }
  if (text == "0" || text == "no" || text == "false" || text == "off") {
    *value = false;
    return true;
  }
  return false;
}

}  // namespace

bool group_enabled_by_spec(const std::string& spec, const std::string& group) {
  return group_spec_enables(spec, group);  // the grammar every tool shares
}

Config config_from_environment() {
  Config c;
  if (const char* v = std::getenv("NANOTRACE_MODE")) {
    std::string_view s = v;
    if (s == "overwrite") {
      c.mode = Mode::kOverwrite;
    } else if (s == "discard") {
      c.mode = Mode::kDiscard;
    } else if (s == "block") {
      c.mode = Mode::kBlock;
    } else {
      warn("NANOTRACE_MODE", v, "overwrite, discard or block", "overwrite");
    }
  }
  if (const char* v = std::getenv("NANOTRACE_BUFFER")) {
    uint64_t bytes = parse_size(v);
    if (bytes == 0 || bytes > kMaxRing) {
      warn("NANOTRACE_BUFFER", v, "a size such as 1M, 64K..1G", "1M");
    } else {
      c.ring_size = round_up_pow2(bytes);
    }
  }
  if (const char* v = std::getenv("NANOTRACE_THREADS")) {
    uint64_t n = parse_size(v);
    if (n == 0 || n > 65536) {
      warn("NANOTRACE_THREADS", v, "1..65536", "256");
    } else {
      c.max_threads = static_cast<uint32_t>(n);
    }
  }
  if (const char* v = std::getenv("NANOTRACE_GROUPS")) c.groups = v;
  if (const char* v = std::getenv("NANOTRACE_NAME")) c.name = std::string(v).substr(0, 63);
  if (const char* v = std::getenv("NANOTRACE_KEEP")) {
    if (!parse_flag(v, &c.keep_on_exit)) {
      warn("NANOTRACE_KEEP", v, "1 or 0", "0 (the segment is removed at exit)");
    }
  }
  if (const char* v = std::getenv("NANOTRACE_BLOCK_TIMEOUT")) {
    if (!parse_duration(v, &c.block_timeout_ns)) {
      warn("NANOTRACE_BLOCK_TIMEOUT", v, "a time such as 100ms, 2s, 0 or inf", "100ms");
    }
  }
  if (const char* v = std::getenv("NANOTRACE_BLOCK_MAX_AGE")) {
    uint64_t ns = 0;
    if (!parse_duration(v, &ns) || ns == 0 || ns == kWaitForever) {
      warn("NANOTRACE_BLOCK_MAX_AGE", v, "a time such as 50ms or 3600s", "2^46 clock ticks");
    } else {
      c.block_max_age_ns = ns;
    }
  }
  if (const char* v = std::getenv("NANOTRACE_TRIGGER")) c.trigger = v;
  if (const char* v = std::getenv("NANOTRACE_TRIGGER_AFTER")) {
    if (!Trigger::parse_window(v, &c.trigger_after_events, &c.trigger_after_ns)) {
      warn("NANOTRACE_TRIGGER_AFTER", v, "a count of events, or a time such as 500us, 2ms",
           "freezing on the matching record");
    }
  }
  if (const char* v = std::getenv("NANOTRACE_CRASH_HANDLER")) {
    if (!parse_flag(v, &c.crash_handler)) {
      warn("NANOTRACE_CRASH_HANDLER", v, "1 or 0", "0 (no crash handler)");
    }
  }
  if (const char* v = std::getenv("NANOTRACE_RUN_ID")) {
    char* end = nullptr;
    c.run_id = std::strtoull(v, &end, 10);
    if (end == v || *end != '\0') {
      c.run_id = 0;
      warn("NANOTRACE_RUN_ID", v, "a decimal number", "none");
    }
  }
  if (const char* v = std::getenv("NANOTRACE_CLOCK")) {
    std::string_view s = v;
    if (s == "monotonic") {
      c.force_monotonic = true;
    } else if (s != "tsc") {
      warn("NANOTRACE_CLOCK", v, "tsc or monotonic", "tsc when it is invariant");
    }
  }
  return c;
}

Status apply_options(const Options& o, Config* c) {
  if (o.buffer_bytes) {
    if (*o.buffer_bytes == 0 || *o.buffer_bytes > kMaxRing) {
      return Status::Invalid("buffer_bytes must be in 1..1 GiB");
    }
    c->ring_size = round_up_pow2(*o.buffer_bytes);
  }
  if (o.max_threads) {
    if (*o.max_threads == 0 || *o.max_threads > 65536) {
      return Status::Invalid("max_threads must be in 1..65536");
    }
    c->max_threads = *o.max_threads;
  }
  if (o.mode) {
    if (static_cast<uint32_t>(*o.mode) > 2) return Status::Invalid("unknown mode");
    c->mode = *o.mode;
  }
  if (o.groups) c->groups = *o.groups;
  if (o.name) c->name = o.name->substr(0, 63);
  if (o.keep_on_exit) c->keep_on_exit = *o.keep_on_exit;
  if (o.crash_handler) c->crash_handler = *o.crash_handler;
  if (o.block_timeout_ns) c->block_timeout_ns = *o.block_timeout_ns;
  return Status::Ok();
}

}  // namespace nanotrace::runtime
