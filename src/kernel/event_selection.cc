// Resolving --kernel GROUPS into ftrace events, from the systems and events tracefs lists.
#include "kernel/event_selection.hpp"

#include <algorithm>
#include <set>

#include "kernel/tracefs_cxx.hpp"

namespace nanotrace::kernel {
namespace {

std::vector<std::string> take_list(char** list) {
  std::vector<std::string> out;
  if (!list) return out;
  for (char** p = list; *p; ++p) out.emplace_back(*p);
  tracefs_list_free(list);
  std::sort(out.begin(), out.end());
  return out;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The scheduler events `sched` means, with the field that names the traced thread.
struct SchedEvent {
  const char* name;
  PidFilter filter;
};
constexpr SchedEvent kSchedEvents[] = {
    {"sched_switch", PidFilter::kSwitch},         {"sched_wakeup", PidFilter::kPidField},
    {"sched_wakeup_new", PidFilter::kPidField},   {"sched_process_fork", PidFilter::kForkParent},
    {"sched_process_exit", PidFilter::kPidField},
};

PidFilter filter_of(const std::string& system, const std::string& event) {
  if (system == "syscalls" || system == "raw_syscalls") return PidFilter::kCommonPid;
  if (system == "sched") {
    for (const SchedEvent& s : kSchedEvents) {
      if (event == s.name) return s.filter;
    }
  }
  return PidFilter::kNone;
}

}  // namespace

Result<std::vector<EventSpec>> resolve_groups(const std::vector<std::string>& groups) {
  if (!tracefs_tracing_dir()) {
    return Status::NotFound(
        "tracefs is not mounted and cannot be (mount -t tracefs nodev "
        "/sys/kernel/tracing)");
  }
  std::vector<std::string> systems = take_list(tracefs_event_systems(nullptr));
  auto has_system = [&](const std::string& s) {
    return std::binary_search(systems.begin(), systems.end(), s);
  };
  std::vector<EventSpec> out;
  std::set<std::pair<std::string, std::string>> seen;
  auto add = [&](const std::string& system, const std::string& event) {
    if (seen.insert({system, event}).second) {
      out.push_back({system, event, filter_of(system, event)});
    }
  };
  for (const std::string& item : groups) {
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      std::string system = item.substr(0, colon), event = item.substr(colon + 1);
      if (!is_identifier(system) || !is_identifier(event)) {
        return Status::Invalid("--kernel: '" + item + "' is not a system:event name");
      }
      std::vector<std::string> events = take_list(tracefs_system_events(nullptr, system.c_str()));
      if (!std::binary_search(events.begin(), events.end(), event)) {
        return Status::NotFound("--kernel: this kernel has no event " + item);
      }
      add(system, event);
      continue;
    }
    if (!is_identifier(item)) {
      return Status::Invalid("--kernel: '" + item +
                             "' is not a group (block, io_uring, sched, syscalls, a system "
                             "or system:event)");
    }
    if (!has_system(item)) {
      return Status::NotFound("--kernel: this kernel has no event system '" + item + "'");
    }
    std::vector<std::string> events = take_list(tracefs_system_events(nullptr, item.c_str()));
    if (item == "sched") {
      for (const SchedEvent& s : kSchedEvents) {
        if (std::binary_search(events.begin(), events.end(), std::string(s.name))) {
          add(item, s.name);
        }
      }
      continue;
    }
    for (const std::string& e : events) add(item, e);
  }
  if (out.empty()) return Status::Invalid("--kernel: no events selected");
  return out;
}

std::string pid_filter(const EventSpec& spec, const std::vector<uint32_t>& tids) {
  std::vector<const char*> fields;
  switch (spec.filter) {
    case PidFilter::kNone:
      return "";
    case PidFilter::kCommonPid:
      fields = {"common_pid"};
      break;
    case PidFilter::kSwitch:
      fields = {"prev_pid", "next_pid"};
      break;
    case PidFilter::kPidField:
      fields = {"pid"};
      break;
    case PidFilter::kForkParent:
      fields = {"parent_pid"};
      break;
  }
  std::string f;
  for (const char* field : fields) {
    for (uint32_t tid : tids) {
      if (!f.empty()) f += " || ";
      f += std::string(field) + " == " + std::to_string(tid);
    }
  }
  // The kernel takes one page of filter text: a process with very many threads is not
  // filtered rather than refused.
  return f.size() < 4000 ? f : "";
}

}  // namespace nanotrace::kernel
