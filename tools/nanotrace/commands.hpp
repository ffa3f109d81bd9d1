// The nanotrace command-line tool's subcommands. Each returns the process exit status:
// 0 on success, 1 on an error (already printed as one "nanotrace: ..." line on stderr).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::cli {

int fail(const Status& status);
// j as indented JSON text that is valid UTF-8 whatever its strings hold.
std::string dump_json(const nlohmann::json& j);
// A comma-separated list option's items ("block,sched" -> block, sched), empty ones left out.
std::vector<std::string> split_list(const std::string& s);
// Trace::open, then one "nanotrace: warning: ..." line on stderr if part of a trace file had
// to be ignored (a torn or damaged tail).
Result<std::unique_ptr<Trace>> open_source(const std::string& source, bool writable = false);

int cmd_list(bool json);
int cmd_events(const std::string& source, bool json);
int cmd_enable(const std::string& source, const std::vector<std::string>& groups, bool enable);

struct DumpOptions {
  bool json = false;
  int64_t limit = 0;                // 0 = no limit; negative is refused
  std::vector<std::string> events;  // group:event or group filters; empty = all
};
int cmd_dump(const std::string& source, const DumpOptions& options);
int cmd_stats(const std::string& source, bool json);
int cmd_breakdown(const std::string& source, bool json);

// `nanotrace merge`: nodes' snapshots into one multi-node trace file.
int cmd_merge(const std::vector<std::string>& inputs, const std::string& output, bool json);

int cmd_arm(const std::string& source, const std::string& expression, const std::string& after);
int cmd_disarm(const std::string& source);
int cmd_resume(const std::string& source);
int cmd_status(const std::string& source);
// status's lines for a duration trigger: the pair or open operation that matched, the counts
// (duration_status.cc). Nothing for a record trigger.
void print_duration_status(Trace& trace, const TriggerInfo& trigger);

}  // namespace nanotrace::cli
