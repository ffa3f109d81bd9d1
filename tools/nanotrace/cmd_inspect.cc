// `nanotrace list`, `events`, `enable` and `disable`: what is traced and what is switched on.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/group_spec.hpp"
#include "base/utf8.hpp"
#include "commands.hpp"
#include "nanotrace/controller.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::cli {

int fail(const Status& status) {
  std::fprintf(stderr, "nanotrace: %s\n", utf8::escape_text(status.message()).c_str());
  return 1;
}

std::string dump_json(const nlohmann::json& j) {
  // Strings are made valid UTF-8 (utf8::valid) before they get here; replace is the backstop
  // that keeps nlohmann from throwing on a string that was missed.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::unique_ptr<Trace>> open_source(const std::string& source, bool writable) {
  auto opened = Trace::open(source, writable);
  if (opened.ok() && !(*opened)->warning().empty()) {
    std::fprintf(stderr, "nanotrace: warning: %s\n", (*opened)->warning().c_str());
  }
  return opened;
}

int cmd_list(bool json) {
  std::vector<ProcessEntry> all = list_processes();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const ProcessEntry& e : all) {
      nlohmann::json j = {{"pid", e.info.pid}, {"path", utf8::valid(e.info.path)}};
      if (!e.error.empty()) {
        j["error"] = utf8::valid(e.error);
      } else {
        j.update({{"name",
                   utf8::valid(e.info.user_name.empty() ? e.info.process_name : e.info.user_name)},
                  {"process", utf8::valid(e.info.process_name)},
                  {"alive", e.info.alive},
                  {"threads", e.threads},
                  {"mode", mode_name(e.info.mode)},
                  {"bytes", e.resident_bytes},
                  {"events", e.events},
                  {"lost", e.lost}});
      }
      out.push_back(j);
    }
    fmt::print("{}\n", dump_json(out));
    return 0;
  }
  fmt::print("{:>8}  {:<16} {:<6} {:>7}  {:<9} {:>10} {:>12} {:>10}\n", "PID", "NAME", "ALIVE",
             "THREADS", "MODE", "BYTES", "EVENTS", "LOST");
  for (const ProcessEntry& e : all) {
    if (!e.error.empty()) {
      fmt::print("{:>8}  unreadable: {}\n", e.info.pid, utf8::escape_text(e.error));
      continue;
    }
    std::string name =
        utf8::escape_text(e.info.user_name.empty() ? e.info.process_name : e.info.user_name);
    // A segment set aside after its pid was reused is named by its path (recover takes it).
    bool aside = e.info.path != "/dev/shm/nanotrace-" + std::to_string(e.info.pid);
    fmt::print("{:>8}  {:<16} {:<6} {:>7}  {:<9} {:>10} {:>12} {:>10}{}\n", e.info.pid, name,
               e.info.alive ? "yes" : "no", e.threads, mode_name(e.info.mode), e.resident_bytes,
               e.events, e.lost, aside ? "  " + utf8::escape_text(e.info.path) : "");
  }
  return 0;
}

int cmd_events(const std::string& source, bool json) {
  auto trace = open_source(source);
  if (!trace.ok()) return fail(trace.status());
  Trace& t = **trace;
  std::vector<GroupInfo> groups = t.groups();
  nlohmann::json out = nlohmann::json::array();
  if (!json) fmt::print("{:>5}  {:<32} {:<4} {:<40} {}\n", "ID", "EVENT", "ON", "FIELDS", "SOURCE");
  for (const EventInfo& e : t.events()) {
    if (e.is_guard) continue;
    bool on = e.group_index < groups.size() && groups[e.group_index].enabled;
    if (json) {
      nlohmann::json fields = nlohmann::json::array();
      for (const FieldInfo& f : e.fields) {
        fields.push_back({{"name", utf8::valid(f.name)}, {"type", field_type_name(f.type)}});
      }
      out.push_back({{"id", e.id},
                     {"group", utf8::valid(e.group)},
                     {"event", utf8::valid(e.name)},
                     {"enabled", on},
                     {"format", utf8::valid(e.format)},
                     {"fields", fields},
                     {"file", utf8::valid(e.file)},
                     {"line", e.line}});
      continue;
    }
    std::string fields;
    for (const FieldInfo& f : e.fields) {
      fields += fmt::format("{}{}:{}", fields.empty() ? "" : " ", utf8::escape_text(f.name),
                            field_type_name(f.type));
    }
    fmt::print("{:>5}  {:<32} {:<4} {:<40} {}:{}\n", e.id, utf8::escape_text(e.full_name()),
               on ? "yes" : "no", fields, utf8::escape_text(e.file), e.line);
  }
  if (json) fmt::print("{}\n", dump_json(out));
  return 0;
}

int cmd_enable(const std::string& source, const std::vector<std::string>& names, bool enable) {
  auto control = Controller::attach(source);
  if (!control.ok()) return fail(control.status());
  Controller& c = **control;
  // Several arguments are one list: `enable PID io sched` is `enable PID io,sched`.
  std::string spec;
  for (const std::string& n : names) spec += (spec.empty() ? "" : ",") + n;
  std::vector<std::string> known;
  for (const GroupInfo& g : c.groups()) known.push_back(g.name);
  auto targets = groups_selected_by_spec(spec, known);
  if (!targets.ok()) return fail(targets.status());
  for (const std::string& g : *targets) {
    Status s = c.set_group_enabled(g, enable);
    if (!s.ok()) return fail(s);
  }
  for (const std::string& g : *targets) fmt::print("{} {}\n", enable ? "enabled" : "disabled", g);
  return 0;
}

}  // namespace nanotrace::cli
