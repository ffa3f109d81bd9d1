// `nanotrace fleet arm|disarm|snapshot|status|collect|resume`: commands to every agent of a
// fleet through the broker (src/fleet/client.hpp). Part of nanotrace-net (network_commands.hpp);
// their options are in fleet_cli.cc.
#include <fmt/format.h>

#include "base/clock.hpp"
#include "commands.hpp"
#include "fleet/client.hpp"
#include "fleet/protocol.hpp"
#include "fleet_commands.hpp"
#include "node_output.hpp"

namespace nanotrace::cli {

Result<uint64_t> parse_duration_ns(const std::string& text, const char* what);
int cmd_agent(const FleetCommands& c);

namespace {

using nlohmann::json;

Result<std::unique_ptr<fleet::FleetClient>> connect(const FleetCommands& c) {
  fleet::ClientOptions o;
  o.broker.url = c.broker;
  o.broker.name = "nanotrace-fleet";
  auto credentials = fleet::read_credentials(c.credentials);
  if (!credentials.ok()) return credentials.status();
  o.broker.credentials = *credentials;
  o.fleet = c.fleet_name;
  o.nodes = c.nodes;
  o.timeout_ms = c.timeout_ms;
  o.parallel = c.parallel;
  o.zstd = !c.no_zstd;
  return fleet::FleetClient::connect(o);
}

// Prints each node's answer; 1 if a node reported an error or fewer nodes than --nodes answered.
int report(const FleetCommands& c, const std::vector<json>& answers, bool json_out,
           const std::function<void(const json&)>& print) {
  int status = 0;
  if (json_out) {
    fmt::print("{}\n", dump_json(answers));
  } else {
    for (const json& a : answers) print(a);
  }
  for (const json& a : answers) {
    if (a.contains("error")) {
      fmt::print(stderr, "nanotrace: node {}: {}\n", a["node"].get<std::string>(),
                 a["error"].dump());
      status = 1;
    }
  }
  if (c.nodes != 0 && answers.size() < c.nodes) {
    fmt::print(stderr, "nanotrace: {} of {} nodes answered\n", answers.size(), c.nodes);
    status = 1;
  }
  if (answers.empty()) {
    fmt::print(stderr, "nanotrace: no agent answered\n");
    status = 1;
  }
  return status;
}

void print_processes(const json& a) {
  for (const json& p : a.value("processes", json::array())) {
    fmt::print("  process {} {}{}\n", p.value("pid", 0), p.value("name", ""),
               p.contains("error") ? ": " + p["error"].get<std::string>() : "");
  }
}

int collect(fleet::FleetClient& client, const FleetCommands& c, const std::string& round) {
  auto wait = parse_duration_ns(c.wait, "--wait");
  if (!wait.ok()) return fail(wait.status());
  std::string dir =
      c.dir.empty() ? "fleet-" + (round.empty() ? std::string("latest") : round) : c.dir;
  auto r = client.collect(round, dir, static_cast<int>(*wait / 1000000));
  if (!r.ok()) return fail(r.status());
  fmt::print("round {}: {} files from {} nodes, {:.1f} MiB in {:.2f} s into {}", r->round, r->files,
             r->nodes, static_cast<double>(r->bytes) / (1 << 20), r->seconds, dir);
  if (!c.no_zstd) {
    fmt::print(" ({:.1f} MiB over the broker)", static_cast<double>(r->wire_bytes) / (1 << 20));
  }
  fmt::print("\n");
  for (const std::string& e : r->errors) fmt::print(stderr, "nanotrace: {}\n", e);
  return r->errors.empty() ? 0 : 1;
}

// The command an arm, disarm, resume, status or snapshot sends to every node.
Result<fleet::Command> build_command(const FleetCommands& c) {
  fleet::Command command;
  if (c.arm->parsed()) {
    command.op = fleet::Command::Op::kArm;
    command.expression = c.expression;
    command.after = c.after;
    if (!c.before.empty()) {
      auto before = parse_duration_ns(c.before, "--before");
      if (!before.ok()) return before.status();
      command.before_ns = *before;
    }
    if (c.fleet->get_subcommand("arm")->count("--rate") != 0) {
      auto rate = parse_duration_ns(c.rate, "--rate");
      if (!rate.ok()) return rate.status();
      command.rate_ns = *rate;
    }
  } else if (c.disarm->parsed()) {
    command.op = fleet::Command::Op::kDisarm;
  } else if (c.resume->parsed()) {
    command.op = fleet::Command::Op::kResume;
  } else if (c.status->parsed()) {
    command.op = fleet::Command::Op::kStatus;
  } else {
    command.op = fleet::Command::Op::kSnapshot;
    command.round = fleet::new_round_id(sys::realtime_ns(), "request");
  }
  return command;
}

// One node's answer to `fleet status`.
void print_status(const json& a) {
  const json clock = a.value("clock", json::object());
  const json bound = clock.value("bound_ns", json(nullptr));
  std::string clock_text = clock.value("source", "unknown");
  if (clock_text != "unknown") {
    clock_text += bound.is_number_unsigned() ? " " + error_bound_text(bound.get<uint64_t>(), false)
                                             : " not synchronised";
  }
  fmt::print(
      "node {}: broker {}, armed '{}', {} rounds ({} coalesced, {} rate-limited, {} "
      "local only), last freeze {:.3f} ms after its match, clock {}\n",
      a["node"].get<std::string>(), a.value("connected", false) ? "up" : "down",
      a.value("armed", ""), a.value("rounds", 0), a.value("coalesced", 0),
      a.value("rate_limited", 0), a.value("local_only", 0), a.value("last_latency_ns", 0.0) / 1e6,
      clock_text);
  if (a.contains("ship")) {
    const json& sh = a["ship"];
    // The last error while it is the news (no success since).
    const std::string error =
        sh.value("last_error_realtime_ns", 0ull) > sh.value("last_success_realtime_ns", 0ull)
            ? sh.value("last_error", "")
            : "";
    fmt::print(
        "  ship: {} snapshots shipped ({} events), {} queued, {} failed attempts, {} "
        "rejected{}\n",
        sh.value("shipped", 0), sh.value("events", 0), sh.value("queued", 0),
        sh.value("failures", 0), sh.value("rejected", 0),
        error.empty() ? "" : ", last error: " + error);
  }
  for (const json& p : a.value("processes", json::array())) {
    fmt::print("  process {} {}: trigger {}{}, {} threads, {:.2f} s of history, {} lost\n",
               p.value("pid", 0), p.value("name", ""), p.value("trigger", ""),
               p.value("expression", "").empty() ? "" : " on " + p.value("expression", ""),
               p.value("threads", 0), p.value("history_seconds", 0.0), p.value("lost", 0));
  }
}

int run_fleet(const FleetCommands& c) {
  auto client = connect(c);
  if (!client.ok()) return fail(client.status());
  if (c.fetch->parsed()) {
    auto bytes = (*client)->fetch(c.fetch_node, c.fetch_file, c.output);
    if (!bytes.ok()) return fail(bytes.status());
    fmt::print("{}: {} bytes from node {}\n", c.output, *bytes, c.fetch_node);
    return 0;
  }
  if (!c.arm->parsed() && !c.disarm->parsed() && !c.resume->parsed() && !c.status->parsed() &&
      !c.snapshot->parsed()) {
    return collect(**client, c, c.round);
  }
  auto command = build_command(c);
  if (!command.ok()) return fail(command.status());
  auto answers = (*client)->command(command->to_json());
  if (!answers.ok()) return fail(answers.status());
  if (c.arm->parsed()) {
    return report(c, *answers, c.json, [&](const json& a) {
      fmt::print("node {}: armed '{}'\n", a["node"].get<std::string>(), c.expression);
      print_processes(a);
    });
  }
  if (c.status->parsed()) return report(c, *answers, c.json, print_status);
  if (c.snapshot->parsed()) {
    int status = report(c, *answers, c.json, [](const json& a) {
      fmt::print("node {}: frozen, {} processes copied\n", a["node"].get<std::string>(),
                 a.value("processes", json::array()).size());
    });
    if (status != 0) return status;
    return collect(**client, c, command->round);
  }
  return report(c, *answers, c.json, [](const json& a) {
    fmt::print("node {}: done\n", a["node"].get<std::string>());
    print_processes(a);
  });
}

}  // namespace

bool run_fleet_commands(const FleetCommands& c, int* status) {
  if (c.agent->parsed()) {
    *status = cmd_agent(c);
    return true;
  }
  if (c.fleet->parsed()) {
    *status = run_fleet(c);
    return true;
  }
  return false;
}

}  // namespace nanotrace::cli
