// `nanotrace fleet arm|disarm|snapshot|status|collect|resume`: commands to every agent of a
// fleet through the broker (src/fleet/client.hpp), and their registration with the CLI.
#include <fmt/format.h>
#include <time.h>

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
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    command.round = fleet::new_round_id(
        static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec),
        "request");
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

// What agent and every fleet command share: how to reach the broker.
void add_broker_options(CLI::App* sub, FleetCommands* c) {
  sub->add_option("--broker", c->broker, "NATS server URL")->capture_default_str();
  sub->add_option("--credentials", c->credentials,
                  "file (mode 0600) with token=, or user= and password=")
      ->capture_default_str();
  sub->add_option("--fleet", c->fleet_name, "fleet name (one broker may carry several)")
      ->capture_default_str();
}

// The agent's own shipping of its snapshots into ClickHouse.
void register_agent_shipping(FleetCommands* c) {
  CLI::Option* ship =
      c->agent->add_option("--ship-clickhouse", c->ship_servers,
                           "ship each snapshot into ClickHouse at this HTTP URL "
                           "(http://host:8123); several: shards, as `ship --clickhouse`");
  c->agent->add_option("--ship-database", c->ship_database, "with --ship-clickhouse: database")
      ->capture_default_str()
      ->needs(ship);
  c->agent
      ->add_option("--ship-cluster", c->ship_cluster,
                   "with --ship-clickhouse: the cluster the Distributed tables span, as "
                   "`ship --cluster`")
      ->needs(ship);
  c->agent
      ->add_option("--ship-retry-max", c->ship_retry_max,
                   "with --ship-clickhouse: the longest wait between attempts to ship (they "
                   "start at 0.5 s and double)")
      ->capture_default_str()
      ->needs(ship);
}

void register_agent(CLI::App& app, FleetCommands* c) {
  c->agent =
      app.add_subcommand("agent", "Run this node's fleet agent (flight recorders, triggers)");
  add_broker_options(c->agent, c);
  c->agent->add_option("--node", c->node, "this node's name (default: the host name)");
  c->agent->add_option("--spool", c->spool, "where snapshots are written")->capture_default_str();
  c->agent->add_option("--metrics", c->metrics, "serve /metrics on HOST:PORT");
  c->agent->add_option("--rate", c->rate, "at most one fleet freeze per interval")
      ->capture_default_str();
  c->agent
      ->add_option("--copy-delay", c->copy_delay,
                   "how long a frozen node waits before copying its rings (nodes that share a "
                   "host are still being told; 0: at once)")
      ->capture_default_str();
  c->agent->add_option("--scan-ms", c->scan_ms, "how often to look for new traced processes")
      ->capture_default_str();
  c->agent->add_option("--kernel", c->kernel,
                       "keep the kernel's last events of the traced processes (root): block, "
                       "io_uring, sched, syscalls, another ftrace system or system:event, "
                       "comma-separated; each round's snapshots carry their window");
  c->agent
      ->add_option("--kernel-flight-buffer", c->kernel_flight_buffer_kb,
                   "with --kernel: the overwrite ftrace instance's buffer per CPU in KiB")
      ->capture_default_str()
      ->check(CLI::Range(4u, 1u << 20));
  register_agent_shipping(c);
}

// snapshot's and collect's: where and how the snapshots are gathered.
void add_collect_options(CLI::App* s, FleetCommands* c, const char* wait_help) {
  s->add_option("--dir", c->dir, "where to collect (default: fleet-ROUND)");
  s->add_option("--wait", c->wait, wait_help)->capture_default_str();
  s->add_option("--parallel", c->parallel, "nodes copied at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  s->add_flag("--no-zstd", c->no_zstd, "ask the agents for uncompressed chunks (default: zstd)");
}

void register_fleet(CLI::App& app, FleetCommands* c) {
  c->fleet = app.add_subcommand("fleet", "Arm, freeze and collect every node of a fleet");
  c->fleet->require_subcommand(1);
  auto sub = [&](const char* name, const char* help) {
    CLI::App* s = c->fleet->add_subcommand(name, help);
    add_broker_options(s, c);
    s->add_option("--nodes", c->nodes, "answers to wait for (default: whoever answers in time)");
    s->add_option("--timeout-ms", c->timeout_ms, "how long to wait for answers")
        ->capture_default_str();
    s->add_flag("--json", c->json, "print the answers as JSON");
    return s;
  };
  c->arm = sub("arm", "Arm the trigger in every traced process of every node");
  c->arm->add_option("EXPR", c->expression, "e.g. 'io:complete lat_us>1000'")->required();
  c->arm->add_option("--before", c->before, "history wanted before the match (e.g. 2s)");
  c->arm->add_option("--after", c->after, "keep N events, or a time (500us), after the match");
  c->arm->add_option("--rate", c->rate, "at most one fleet freeze per interval (e.g. 10s)");
  c->disarm = sub("disarm", "Disarm every node's triggers");
  c->resume = sub("resume", "Resume every node's frozen processes");
  c->status = sub("status", "Nodes, processes, history held, losses, armed triggers");
  c->snapshot = sub("snapshot", "Freeze every node now and collect the snapshots");
  add_collect_options(c->snapshot, c, "how long to wait for the nodes");
  c->collect = sub("collect", "Gather a round's snapshots from every node");
  c->collect->add_option("--round", c->round, "the round (default: the latest)");
  add_collect_options(c->collect, c, "how long to wait for --nodes nodes to hold it");
  c->fetch = sub("fetch", "Copy one file of a node's spool");
  c->fetch->add_option("NODE", c->fetch_node, "the node")->required();
  c->fetch->add_option("FILE", c->fetch_file, "a file of its spool")->required();
  c->fetch->add_option("-o,--output", c->output, "where to write it (a new file)")->required();
  c->fetch->add_flag("--no-zstd", c->no_zstd,
                     "ask the agent for uncompressed chunks (default: zstd)");
}

}  // namespace

void register_fleet_commands(CLI::App& app, FleetCommands* c) {
  register_agent(app, c);
  register_fleet(app, c);
}

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
