// `nanotrace dump`: every record in the rings, merged by time, as text or JSON lines,
// followed by the per-thread loss report.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::cli {
namespace {

// An event filter: "group:event" or "group".
bool selected(const std::vector<std::string>& filters, const EventInfo& e) {
  if (filters.empty()) return true;
  for (const std::string& f : filters) {
    if (f == e.group || f == e.full_name()) return true;
  }
  return false;
}

nlohmann::json field_json(const FieldValue& v) {
  using abi::FieldType;
  switch (v.type) {
    case FieldType::kI8:
    case FieldType::kI16:
    case FieldType::kI32:
    case FieldType::kI64:
      return static_cast<int64_t>(v.bits);
    case FieldType::kF32:
    case FieldType::kF64:
      return v.as_double();
    case FieldType::kBool:
      return v.bits != 0;
    case FieldType::kString:
      return std::string(v.text);
    case FieldType::kPointer:
      return fmt::format("0x{:x}", v.bits);
    default:
      return v.bits;
  }
}

}  // namespace

int cmd_dump(const std::string& source, const DumpOptions& options) {
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  Trace& trace = **opened;
  for (const std::string& f : options.events) {
    bool known = false;
    for (const EventInfo& e : trace.events()) known = known || f == e.group || f == e.full_name();
    if (!known) return fail(Status::NotFound("no event or group '" + f + "' in this trace"));
  }
  auto records = trace.read_all();
  const std::vector<ThreadStats>& threads = records->threads();
  Record r;
  uint64_t printed = 0;
  std::string line;
  while (records->next(&r)) {
    if (!selected(options.events, *r.event)) continue;
    const ThreadInfo& t = threads[r.thread].info;
    if (options.json) {
      nlohmann::json fields = nlohmann::json::object();
      for (uint32_t i = 0; i < r.field_count; ++i) {
        fields[r.event->fields[i].name] = field_json(display_value(r, i));
      }
      nlohmann::json j = {
          {"time_ns", r.time_ns},          {"tid", t.tid},    {"thread", t.name}, {"seq", r.seq},
          {"event", r.event->full_name()}, {"fields", fields}};
      fmt::print("{}\n", j.dump());
    } else {
      fmt::print("{:>15} {:>7} {:<15} {:<28} {}\n", r.time_ns, t.tid, t.name, r.event->full_name(),
                 format_fields(r));
    }
    if (options.limit && ++printed >= options.limit) break;
  }
  std::fflush(stdout);
  if (!options.json) {
    for (const ThreadStats& s : records->threads()) {
      if (s.lost() || s.corrupt_blocks) {
        std::fprintf(stderr,
                     "thread %u (%s): %llu records lost (%llu overwritten, %llu dropped)%s\n",
                     s.info.tid, s.info.name.c_str(), static_cast<unsigned long long>(s.lost()),
                     static_cast<unsigned long long>(s.overwritten),
                     static_cast<unsigned long long>(s.dropped),
                     s.corrupt_blocks ? ", corrupt blocks skipped" : "");
      }
    }
  }
  return 0;
}

}  // namespace nanotrace::cli
