// `nanotrace agent`: the fleet agent of this node (src/fleet/agent.hpp), until SIGINT or
// SIGTERM, shipping its snapshots into ClickHouse with --ship-clickhouse. Its log lines go to
// stderr (the journal, under systemd).
#include <fmt/format.h>
#include <signal.h>

#include <atomic>

#include "commands.hpp"
#include "fleet/agent.hpp"
#include "fleet_commands.hpp"
#include "nanotrace/trigger.hpp"

namespace nanotrace::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

}  // namespace

Result<uint64_t> parse_duration_ns(const std::string& text, const char* what) {
  uint64_t events = 0, ns = 0;
  if (!Trigger::parse_window(text, &events, &ns) || events != 0 || (ns == 0 && text != "0")) {
    return Status::Invalid(std::string("bad ") + what + " '" + text + "' (e.g. 2s, 500ms)");
  }
  return ns;
}

int cmd_agent(const FleetCommands& c) {
  fleet::AgentOptions o;
  o.node = c.node;
  o.fleet = c.fleet_name;
  o.spool = c.spool;
  o.broker_url = c.broker;
  o.metrics_address = c.metrics;
  o.scan_ms = c.scan_ms;
  o.kernel = split_list(c.kernel);
  o.kernel_buffer_kb = c.kernel_flight_buffer_kb;
  o.ship.servers = c.ship_servers;
  o.ship.database = c.ship_database;
  o.ship.cluster = c.ship_cluster;
  auto retry_max = parse_duration_ns(c.ship_retry_max, "--ship-retry-max");
  if (!retry_max.ok()) return fail(retry_max.status());
  o.ship.retry_max_ns = *retry_max;
  auto rate = parse_duration_ns(c.rate, "--rate");
  if (!rate.ok()) return fail(rate.status());
  o.rate_ns = *rate;
  auto copy_delay = parse_duration_ns(c.copy_delay, "--copy-delay");
  if (!copy_delay.ok()) return fail(copy_delay.status());
  o.copy_delay_ns = *copy_delay;
  auto announce_for = parse_duration_ns(c.announce_for, "--announce-for");
  if (!announce_for.ok()) return fail(announce_for.status());
  o.announce_for_ns = *announce_for;
  auto live_interval = parse_duration_ns(c.live_interval, "--live-interval");
  if (!live_interval.ok()) return fail(live_interval.status());
  if (*live_interval != 0 && (*live_interval < 50000000ull || *live_interval > 3600000000000ull)) {
    return fail(Status::Invalid("--live-interval must be 0 or between 50ms and 1h"));
  }
  o.live_interval_ms = static_cast<int>(*live_interval / 1000000);
  o.live_waiters = c.live_waiters;
  for (const std::string& text : c.pairs) {
    auto rule = parse_pair_rule(text);
    if (!rule.ok()) return fail(rule.status());
    o.pairs.push_back(*rule);
  }
  auto credentials = fleet::read_credentials(c.credentials);
  if (!credentials.ok()) return fail(credentials.status());
  o.credentials = *credentials;
  auto agent = fleet::Agent::start(o);
  if (!agent.ok()) return fail(agent.status());
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  (*agent)->run(g_stop);
  return 0;
}

}  // namespace nanotrace::cli
