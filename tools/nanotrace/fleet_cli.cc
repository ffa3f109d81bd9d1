// The options of `nanotrace agent` and `nanotrace fleet ...` (fleet_commands.hpp). Both
// executables register them: `nanotrace` to parse and describe the commands, nanotrace-net
// to run them (network_commands.hpp).
#include "fleet_commands.hpp"

namespace nanotrace::cli {
namespace {

// What agent and every fleet command share: how to reach the broker.
void add_broker_options(CLI::App* sub, FleetCommands* c) {
  sub->add_option("--broker", c->broker, "NATS server URL; a cluster's servers: comma-separated")
      ->capture_default_str();
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
  c->agent
      ->add_option("--announce-for", c->announce_for,
                   "how long a freeze's announcement is repeated, for nodes that missed it "
                   "(their server of the cluster lost, their link down); 0: once")
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
  c->agent->add_option("--pair", c->pairs,
                       "BEGIN,END,KEY pair rule of the live view (/metrics: the age of the oldest "
                       "operation in flight, the recent p99; `fleet top`), repeatable (default: "
                       "found from event names, as `top` finds them)");
  c->agent
      ->add_option("--live-interval", c->live_interval,
                   "how often the live view samples the node's traced processes, at nice 19 "
                   "(0: no live view)")
      ->capture_default_str();
  c->agent
      ->add_option("--live-waiters", c->live_waiters,
                   "operations in flight the live view keeps, oldest first (`fleet top`)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
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
    s->add_option("--nodes", c->nodes,
                  "the nodes to wait for: a count, or their names (node1,node2,...), so that "
                  "those missing are named (default: whoever answers in time)");
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
  c->top = sub("top",
               "The operations in flight of every node, oldest first (the long waiters), and "
               "each node's rates and latency per pair rule");
  c->top->add_option("--waiters", c->waiters, "operations in flight listed, oldest first")
      ->capture_default_str();
  c->top->add_flag("--once", c->top_once, "print the nodes' latest frames once and exit");
  c->top->add_option("--interval", c->top_interval_s, "seconds between refreshes of the view")
      ->capture_default_str();
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

}  // namespace nanotrace::cli
