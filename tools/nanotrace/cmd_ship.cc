// `nanotrace ship SRC... --clickhouse URL`: trace files (or directories of them, or live
// sources) into ClickHouse (src/ship/shipper.hpp), one line (or JSON object) per trace. Part of
// nanotrace-net (network_commands.hpp); its options are in ship_cli.cc.
//
// Errors: a transient one (connection, a busy server) is retried with backoff for --retry-for
// per trace, each retry said on stderr; a refusal (the server refuses the requests or the
// schema differs) is not: refused at the start, nothing is shipped; refused for one trace,
// the others are still tried. A damaged trace is shipped as far as it reads, with a warning.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/utf8.hpp"
#include "commands.hpp"
#include "ship/shipper.hpp"
#include "ship_command.hpp"

namespace nanotrace::cli {

// cmd_agent.cc: "2s", "500ms", "0".
Result<uint64_t> parse_duration_ns(const std::string& text, const char* what);

namespace {

using Clock = std::chrono::steady_clock;

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

std::string text_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + utf8::escape_text(items[i]);
  return out;
}

nlohmann::json report_json(const std::string& source, const ship::ShipReport& r) {
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
                      {"lost_records", r.counts.lost_records},
                      {"pairs", r.pairs},
                      {"corrupt_blocks", r.damage.corrupt_blocks},
                      {"unreadable_records", r.damage.unreadable},
                      {"damaged", r.damage.damaged()}};
  if (!r.damage.warning.empty()) j["warning"] = utf8::valid(r.damage.warning);
  if (r.already_stored) {
    j["stored_nodes"] = r.stored_nodes;
    j["stored_pairs"] = r.stored_pairs;
    j["nodes_not_stored"] = r.nodes_not_stored;
    j["pairs_not_stored"] = r.pairs_not_stored;
  }
  return j;
}

// An already stored trace's line: what this ship asked for that the store does not hold.
std::string not_stored_text(const ship::ShipReport& r) {
  std::string out;
  if (!r.nodes_not_stored.empty()) {
    out +=
        fmt::format("; stored as {} {}, not as {}", r.stored_nodes.size() == 1 ? "node" : "nodes",
                    text_list(r.stored_nodes), text_list(r.nodes_not_stored));
  }
  if (!r.pairs_not_stored.empty()) {
    out += fmt::format("; pairs not stored: {} (stored: {})", text_list(r.pairs_not_stored),
                       r.stored_pairs.empty() ? "none" : text_list(r.stored_pairs));
  }
  if (!out.empty()) out += " (a trace is stored once, as first shipped)";
  return out;
}

void print_report(const std::string& source, const ship::ShipReport& r, bool json) {
  if (json) {
    fmt::print("{}\n", report_json(source, r).dump(-1, ' ', false,
                                                   nlohmann::json::error_handler_t::replace));
    return;
  }
  const std::string nodes = (r.nodes.size() == 1 ? "node " : "nodes ") + text_list(r.nodes);
  if (r.already_stored) {
    fmt::print("{}: trace {:016x} ({}) is already stored in {}: nothing sent{}\n",
               utf8::escape_text(source), r.trace_id, nodes, r.server, not_stored_text(r));
    return;
  }
  fmt::print(
      "{}: trace {:016x} ({}) stored in {}: {} events, {} intervals, {} I/Os with their stages, "
      "{} loss rows ({} records lost{}){}\n",
      utf8::escape_text(source), r.trace_id, nodes, r.server, r.counts.events, r.counts.intervals,
      r.counts.ios, r.counts.losses, r.counts.lost_records,
      r.damage.corrupt_blocks ? fmt::format(", {} corrupt blocks", r.damage.corrupt_blocks) : "",
      r.replaced_rows ? fmt::format("; {} rows of an interrupted attempt replaced", r.replaced_rows)
                      : "");
}

// A damaged trace is stored as far as it reads: said on stderr.
void warn_damage(const std::string& source, const ship::ShipReport& r) {
  if (!r.damage.damaged()) return;
  fmt::print(stderr,
             "nanotrace: warning: {}: damaged ({} corrupt blocks, {} records unreadable{}): "
             "trace {:016x} holds what could be read, its losses counted as lost (cause "
             "corrupt); an intact copy of the file is another trace\n",
             utf8::escape_text(source), r.damage.corrupt_blocks, r.damage.unreadable,
             r.damage.warning.empty() ? "" : "; " + utf8::escape_text(r.damage.warning),
             r.trace_id);
}

class Retrying {
 public:
  Retrying(ship::ShipOptions options, uint64_t retry_ns)
      : options_(std::move(options)), retry_(std::chrono::nanoseconds(retry_ns)) {}

  // Connects (if not connected); a refusal is final, a transient error is retried.
  Status connect() {
    return retry([&]() -> Status {
      if (shipper_) return Status::Ok();
      auto s = ship::Shipper::connect(options_);
      if (!s.ok()) return s.status();
      shipper_ = std::move(*s);
      return Status::Ok();
    });
  }

  Result<ship::ShipReport> ship(Trace& trace, const std::string& source) {
    ship::ShipReport report;
    Status s = retry([&]() -> Status {
      if (!shipper_) {
        auto c = ship::Shipper::connect(options_);
        if (!c.ok()) return c.status();
        shipper_ = std::move(*c);
      }
      auto r = shipper_->ship(trace, source);
      if (!r.ok()) return r.status();
      report = std::move(*r);
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return report;
  }

 private:
  template <class F>
  Status retry(F attempt) {
    const auto deadline = Clock::now() + retry_;
    auto wait = std::chrono::milliseconds(500);
    for (;;) {
      Status s = attempt();
      if (s.ok() || s.code() != StatusCode::kIoError) return s;
      shipper_.reset();  // a new connection for the next attempt
      if (Clock::now() + wait > deadline) return s;
      fmt::print(stderr, "nanotrace: warning: {}; retrying in {:.1f} s\n", s.message(),
                 std::chrono::duration<double>(wait).count());
      std::this_thread::sleep_for(wait);
      wait = std::min(wait * 2, std::chrono::milliseconds(8000));
    }
  }

  ship::ShipOptions options_;
  Clock::duration retry_;
  std::unique_ptr<ship::Shipper> shipper_;
};

int cmd_ship(const ShipCommand& c) {
  ship::ShipOptions options;
  options.servers = c.servers;
  options.database = c.database;
  options.cluster = c.cluster;
  options.node = c.node;
  options.batch_rows = c.batch_rows;
  options.connections = c.connections;
  options.compress = c.no_compress || c.compress == "none" ? ship::Compression::kNone
                     : c.compress == "zstd"                ? ship::Compression::kZstd
                                                           : ship::Compression::kAuto;
  for (const std::string& p : c.pairs) {
    auto rule = parse_pair_rule(p);
    if (!rule.ok()) return fail(rule.status());
    options.pairs.push_back(*rule);
  }
  auto retry_ns = parse_duration_ns(c.retry_for, "--retry-for");
  if (!retry_ns.ok()) return fail(retry_ns.status());
  auto sources = expand_sources(c.sources);
  if (!sources.ok()) return fail(sources.status());
  // Every source is opened once before the server is contacted: a mistyped path is said at
  // once, not after the retries of an unreachable server. Each is closed again (a directory
  // may hold more traces than a process may keep open) and opened again to be shipped.
  int status = 0;
  std::vector<std::string> openable;
  for (const std::string& source : *sources) {
    auto trace = Trace::open(source);  // its warnings are printed when it is shipped
    if (!trace.ok()) {
      status = fail(trace.status());
      continue;
    }
    openable.push_back(source);
  }
  if (openable.empty()) return status;
  Retrying shipper(options, *retry_ns);
  if (Status s = shipper.connect(); !s.ok()) return fail(s);
  for (const std::string& source : openable) {
    auto trace = open_source(source);
    if (!trace.ok()) {
      status = fail(trace.status());
      continue;
    }
    auto report = shipper.ship(**trace, source);
    if (!report.ok()) {
      status = fail(report.status());
      continue;
    }
    for (const std::string& skipped : report->skipped_pairs) {
      fmt::print(stderr, "nanotrace: warning: {}: pair not shipped: {}\n",
                 utf8::escape_text(source), utf8::escape_text(skipped));
    }
    if (!report->already_stored) warn_damage(source, *report);
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
