// `nanotrace fleet arm|disarm|snapshot|status|top|collect|resume|fetch`: commands to every agent of
// a fleet through the broker (src/fleet/client.hpp). Part of nanotrace-net
// (network_commands.hpp); their options are in fleet_cli.cc. Every answer is read with its
// type's parser: a node whose answer cannot be read is one error line, and the others are
// shown.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "base/clock.hpp"
#include "commands.hpp"
#include "fleet/client.hpp"
#include "fleet/message_fields.hpp"
#include "fleet/protocol.hpp"
#include "fleet_commands.hpp"
#include "fleet_top.hpp"
#include "node_output.hpp"

namespace nanotrace::cli {

Result<uint64_t> parse_duration_ns(const std::string& text, const char* what);
int cmd_agent(const FleetCommands& c);

namespace {

using fleet::printable;
using nlohmann::json;

// --nodes: a count ("4"), or the nodes' names ("node1,node2"), which lets a shortfall name them.
Status parse_nodes(const std::string& text, fleet::ClientOptions* o) {
  if (text.empty()) return Status::Ok();
  if (text.find_first_not_of("0123456789") == std::string::npos) {
    if (text.size() > 9) return Status::Invalid("--nodes " + text + ": too many");
    o->nodes = std::stoul(text);
    return Status::Ok();
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string name = text.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!fleet::valid_name(name)) {
      return Status::Invalid("--nodes: '" + printable(name) +
                             "' is neither a count nor a node name ([A-Za-z0-9_-], 64 at most)");
    }
    if (std::find(o->node_names.begin(), o->node_names.end(), name) == o->node_names.end()) {
      o->node_names.push_back(name);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  o->nodes = o->node_names.size();
  return Status::Ok();
}

Result<std::unique_ptr<fleet::FleetClient>> connect(const FleetCommands& c) {
  fleet::ClientOptions o;
  o.broker.url = c.broker;
  o.broker.name = "nanotrace-fleet";
  Status nodes = parse_nodes(c.nodes, &o);
  if (!nodes.ok()) return nodes;
  auto credentials = fleet::read_credentials(c.credentials);
  if (!credentials.ok()) return credentials.status();
  o.broker.credentials = *credentials;
  o.fleet = c.fleet_name;
  o.timeout_ms = c.timeout_ms;
  o.parallel = c.parallel;
  o.zstd = !c.no_zstd;
  return fleet::FleetClient::connect(o);
}

// Prints each node's readable answer (print: a node that did the command), then one line per
// node that failed it, per answer that could not be read and for the nodes missing. 1 if
// there was any of those, or no answer at all.
template <class T>
int report(const FleetCommands& c, const fleet::Answers<T>& a,
           const std::function<void(const T&)>& print) {
  if (c.json) {
    json out = json::array();
    for (const T& answer : a.answers) out.push_back(answer.json_value());
    for (const fleet::UnreadableAnswer& u : a.unreadable) {
      out.push_back({{"node", u.node}, {"error", u.reason}});
    }
    fmt::print("{}\n", dump_json(out));
  } else {
    for (const T& answer : a.answers) {
      if (answer.error.empty()) print(answer);
    }
  }
  int status = 0;
  for (const T& answer : a.answers) {
    if (answer.error.empty()) continue;
    fmt::print(stderr, "nanotrace: node {}: {}\n", answer.node, printable(answer.error));
    status = 1;
  }
  for (const fleet::UnreadableAnswer& u : a.unreadable) {
    fmt::print(stderr, "nanotrace: {}\n", u.line());
    status = 1;
  }
  if (!a.shortfall.empty()) {
    fmt::print(stderr, "nanotrace: {}\n", a.shortfall);
    status = 1;
  }
  if (a.answers.empty() && a.unreadable.empty()) {
    fmt::print(stderr, "nanotrace: no agent answered\n");
    status = 1;
  }
  return status;
}

void print_processes(const std::vector<fleet::ProcessResult>& processes) {
  for (const fleet::ProcessResult& p : processes) {
    fmt::print("  process {} {}{}\n", p.pid, printable(p.name),
               p.error.empty() ? "" : ": " + printable(p.error));
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
  } else if (c.top->parsed()) {
    command.op = fleet::Command::Op::kTop;
  } else {
    command.op = fleet::Command::Op::kSnapshot;
    command.round = fleet::new_round_id(sys::realtime_ns(), "request");
  }
  return command;
}

// One node's answer to `fleet status`.
void print_status(const fleet::StatusAnswer& a) {
  std::string clock_text = "unknown";
  if (a.clock && a.clock->source != "unknown") {
    clock_text = printable(a.clock->source) +
                 (a.clock->bound_known ? " " + error_bound_text(a.clock->bound_ns, false)
                                       : " not synchronised");
  }
  fmt::print(
      "node {}: broker {}, armed '{}', {} rounds ({} coalesced, {} rate-limited, {} "
      "local only), last freeze {:.3f} ms after its match, clock {}\n",
      a.node, a.connected ? "up" : "down", printable(a.armed), a.rounds, a.coalesced,
      a.rate_limited, a.local_only, static_cast<double>(a.last_latency_ns) / 1e6, clock_text);
  if (a.ship) {
    const fleet::ShipStatus& sh = *a.ship;
    // The last error while it is the news (no success since).
    const std::string error =
        sh.last_error_realtime_ns > sh.last_success_realtime_ns ? printable(sh.last_error) : "";
    fmt::print(
        "  ship: {} snapshots shipped ({} events), {} queued, {} failed attempts, {} "
        "rejected{}\n",
        sh.shipped, sh.events, sh.queued, sh.failures, sh.rejected,
        error.empty() ? "" : ", last error: " + error);
  }
  for (const fleet::ProcessStatus& p : a.processes) {
    fmt::print("  process {} {}: trigger {}{}, {} threads, {:.2f} s of history, {} lost\n", p.pid,
               printable(p.name), printable(p.trigger),
               p.expression.empty() ? "" : " on " + printable(p.expression), p.threads,
               p.history_seconds, p.lost);
  }
}

// `fleet snapshot`: every node freezes now; the round is collected from those that did, even
// when another node failed or answered unreadably.
int snapshot(fleet::FleetClient& client, const FleetCommands& c, const fleet::Command& command) {
  auto answers = client.ask<fleet::SnapshotAnswer>(command);
  if (!answers.ok()) return fail(answers.status());
  int status = report<fleet::SnapshotAnswer>(c, *answers, [](const fleet::SnapshotAnswer& a) {
    fmt::print("node {}: frozen, {} processes copied\n", a.node, a.manifest.processes.size());
  });
  const bool frozen = std::any_of(answers->answers.begin(), answers->answers.end(),
                                  [](const fleet::SnapshotAnswer& a) { return a.error.empty(); });
  if (!frozen) return 1;
  return std::max(status, collect(client, c, command.round));
}

// `fleet top`: the merged list first, then report()'s lines for the nodes that failed or are
// missing. Without --once, asked again every --interval on a cleared terminal until Ctrl-C
// (a screen of plain lines: no terminal state to restore); each round's status is the last's.
int top(fleet::FleetClient& client, const FleetCommands& c, const fleet::Command& command) {
  if (c.json && !c.top_once) {
    return fail(Status::Invalid("--json prints the nodes' frames once: use it with --once"));
  }
  if (!c.top_once && !isatty(STDOUT_FILENO)) {
    return fail(Status::Invalid("fleet top's view needs a terminal; for scripts: --once [--json]"));
  }
  if (!(c.top_interval_s >= 0.1 && c.top_interval_s <= 3600)) {
    return fail(Status::Invalid("--interval must be between 0.1 and 3600 seconds"));
  }
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    auto answers = client.ask<fleet::TopAnswer>(command);
    if (!answers.ok()) return fail(answers.status());
    if (!c.top_once) fmt::print("\033[H\033[2J");
    if (!c.json) print_fleet_top(answers->answers, c.waiters, sys::realtime_ns());
    std::fflush(stdout);
    const int status = report<fleet::TopAnswer>(c, *answers, [](const fleet::TopAnswer&) {});
    if (c.top_once) return status;
    std::this_thread::sleep_until(started + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::duration<double>(c.top_interval_s)));
  }
}

// arm, disarm, resume, status, top and snapshot: one command to every node, each answer read as
// the command's answer type.
int command(fleet::FleetClient& client, const FleetCommands& c) {
  auto command = build_command(c);
  if (!command.ok()) return fail(command.status());
  using fleet::Command;
  switch (command->op) {
    case Command::Op::kArm:
    case Command::Op::kDisarm: {
      auto answers = client.ask<fleet::ProcessesAnswer>(*command);
      if (!answers.ok()) return fail(answers.status());
      const bool arm = command->op == Command::Op::kArm;
      return report<fleet::ProcessesAnswer>(c, *answers, [&](const fleet::ProcessesAnswer& a) {
        if (arm) {
          fmt::print("node {}: armed '{}'\n", a.node, printable(c.expression));
        } else {
          fmt::print("node {}: done\n", a.node);
        }
        print_processes(a.processes);
      });
    }
    case Command::Op::kResume: {
      auto answers = client.ask<fleet::ResumeAnswer>(*command);
      if (!answers.ok()) return fail(answers.status());
      return report<fleet::ResumeAnswer>(c, *answers, [](const fleet::ResumeAnswer& a) {
        fmt::print("node {}: done\n", a.node);
        for (const std::string& e : a.errors) fmt::print("  {}\n", printable(e));
      });
    }
    case Command::Op::kStatus: {
      auto answers = client.ask<fleet::StatusAnswer>(*command);
      if (!answers.ok()) return fail(answers.status());
      return report<fleet::StatusAnswer>(c, *answers, print_status);
    }
    case Command::Op::kTop:
      return top(client, c, *command);
    case Command::Op::kSnapshot:
      return snapshot(client, c, *command);
    case Command::Op::kRounds:
      break;
  }
  return fail(Status::Invalid("no such fleet command"));
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
  if (c.collect->parsed()) return collect(**client, c, c.round);
  return command(**client, c);
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
