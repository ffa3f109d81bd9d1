// `nanotrace ship SRC... --clickhouse URL`: trace files (or directories of them, or live
// sources) into ClickHouse (src/ship/shipper.hpp), one line (or JSON object) per trace. Part of
// nanotrace-net (network_commands.hpp); its options are in ship_cli.cc.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/utf8.hpp"
#include "commands.hpp"
#include "ship/shipper.hpp"
#include "ship_command.hpp"

namespace nanotrace::cli {
namespace {

// The sources to ship: each SRC as given, a directory's regular files in name order.
Result<std::vector<std::string>> expand_sources(const std::vector<std::string>& sources) {
  std::vector<std::string> out;
  for (const std::string& s : sources) {
    std::error_code ec;
    if (!std::filesystem::is_directory(s, ec)) {
      out.push_back(s);
      continue;
    }
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(s, ec)) {
      if (entry.is_regular_file(ec)) files.push_back(entry.path().string());
    }
    if (ec) return Status::IoError(fmt::format("{}: {}", s, ec.message()));
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

void print_report(const std::string& source, const ship::ShipReport& r, bool json) {
  if (json) {
    nlohmann::json j = {{"source", utf8::valid(source)},
                        {"trace_id", fmt::format("{:016x}", r.trace_id)},
                        {"nodes", r.nodes},
                        {"server", utf8::valid(r.server)},
                        {"already_stored", r.already_stored},
                        {"replaced_rows", r.replaced_rows},
                        {"events", r.counts.events},
                        {"intervals", r.counts.intervals},
                        {"ios", r.counts.ios},
                        {"losses", r.counts.losses},
                        {"lost_records", r.counts.lost_records}};
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  std::string nodes = r.nodes.size() == 1 ? "node " : "nodes ";
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    nodes += (i ? ", " : "") + utf8::escape_text(r.nodes[i]);
  }
  if (r.already_stored) {
    fmt::print("{}: trace {:016x} ({}) is already stored in {}: nothing sent\n",
               utf8::escape_text(source), r.trace_id, nodes, r.server);
    return;
  }
  fmt::print(
      "{}: trace {:016x} ({}) stored in {}: {} events, {} intervals, {} I/Os with their stages, "
      "{} loss rows ({} records lost){}\n",
      utf8::escape_text(source), r.trace_id, nodes, r.server, r.counts.events, r.counts.intervals,
      r.counts.ios, r.counts.losses, r.counts.lost_records,
      r.replaced_rows ? fmt::format("; {} rows of an interrupted attempt replaced", r.replaced_rows)
                      : "");
}

int cmd_ship(const ShipCommand& c) {
  ship::ShipOptions options;
  options.servers = c.servers;
  options.database = c.database;
  options.cluster = c.cluster;
  options.node = c.node;
  options.batch_rows = c.batch_rows;
  options.compress = !c.no_compress;
  for (const std::string& p : c.pairs) {
    auto rule = parse_pair_rule(p);
    if (!rule.ok()) return fail(rule.status());
    options.pairs.push_back(*rule);
  }
  auto sources = expand_sources(c.sources);
  if (!sources.ok()) return fail(sources.status());
  auto shipper = ship::Shipper::connect(options);
  if (!shipper.ok()) return fail(shipper.status());
  int status = 0;
  for (const std::string& source : *sources) {
    auto trace = open_source(source);
    if (!trace.ok()) {
      status = fail(trace.status());
      continue;
    }
    auto report = (*shipper)->ship(**trace, source);
    if (!report.ok()) {
      status = fail(report.status());
      continue;
    }
    for (const std::string& skipped : report->skipped_pairs) {
      fmt::print(stderr, "nanotrace: warning: {}: pair not shipped: {}\n",
                 utf8::escape_text(source), utf8::escape_text(skipped));
    }
    print_report(source, *report, c.json);
  }
  return status;
}

}  // namespace

bool run_ship_command(const ShipCommand& c, int* status) {
  if (c.ship == nullptr || !c.ship->parsed()) return false;
  *status = cmd_ship(c);
  return true;
}

}  // namespace nanotrace::cli
