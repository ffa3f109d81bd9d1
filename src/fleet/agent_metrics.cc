// The agent's /metrics (OpenMetrics or Prometheus text format, as the scraper asks; every
// family with HELP and TYPE): per traced process, the history its rings
// hold, the bytes written over, records lost by cause, trigger arms, fires and freezes; per
// node, fleet freezes (taken, coalesced, rate-limited, local-only), the last freeze's latency,
// snapshots written, the broker link and the clock's error bound; with shipping, the snapshots
// shipped into ClickHouse, the failed attempts, the queue and the last error's time; from the
// live view (agent_live.hpp), per pair rule the age of the oldest operation in flight, the
// operations in flight, the recent p99 and max, and the age of the view's last sample.
#include <fmt/format.h>

#include <cmath>

#include "base/openmetrics.hpp"
#include "fleet/agent_state.hpp"

namespace nanotrace::fleet {
namespace {

struct Family {
  std::string name, type, help;
  std::vector<std::string> samples;
};

void add(Family& f, const std::string& labels, double value) {
  std::string sample = f.type == "counter" ? f.name + "_total" : f.name;
  if (std::isnan(value)) {  // OpenMetrics spells it NaN
    f.samples.push_back(fmt::format("{}{{{}}} NaN", sample, labels));
  } else {
    f.samples.push_back(fmt::format("{}{{{}}} {}", sample, labels, value));
  }
}

// Per traced process: the rings' health and the trigger's counts.
std::vector<Family> process_families(LocalProcesses& locals, const std::string& node) {
  Family history{"nanotrace_process_history_seconds", "gauge",
                 "Seconds back from now that every thread's ring of the process still holds"};
  Family overwritten{"nanotrace_process_overwritten_bytes", "counter",
                     "Ring bytes written over since the process started"};
  Family records{"nanotrace_process_records", "counter", "Records written"};
  Family lost{"nanotrace_process_records_lost", "counter", "Records lost, by cause"};
  Family arms{"nanotrace_process_trigger_arms", "counter", "Triggers armed by this agent"};
  Family fires{"nanotrace_process_trigger_fires", "counter", "Triggers that fired"};
  Family freezes{"nanotrace_process_freezes", "counter", "Freezes this agent requested"};
  Family armed{"nanotrace_process_trigger_armed", "gauge", "1 while the trigger is armed"};
  std::lock_guard lock(locals.mu());
  for (auto& p : locals.all()) {
    RingHealth h = ring_health(*p);
    std::string l = fmt::format("{},pid=\"{}\",process=\"{}\"", node, p->pid,
                                openmetrics::label_value(p->name));
    add(history, l, h.history_seconds);
    add(overwritten, l, static_cast<double>(h.overwritten_bytes));
    add(records, l, static_cast<double>(h.records));
    add(lost, l + ",cause=\"dropped\"", static_cast<double>(h.dropped));
    add(lost, l + ",cause=\"no_slot\"", static_cast<double>(h.lost_no_slot));
    add(lost, l + ",cause=\"reclaimed\"", static_cast<double>(h.lost_reclaimed));
    add(arms, l, static_cast<double>(p->arms.load()));
    add(fires, l, static_cast<double>(p->fires.load()));
    add(freezes, l, static_cast<double>(p->freezes.load()));
    add(armed, l, p->control->trigger_state() == abi::TriggerState::kArmed ? 1 : 0);
  }
  return {history, overwritten, records, lost, arms, fires, freezes, armed};
}

// The node's fleet and broker counters.
std::vector<Family> agent_families(const AgentCounters& c, const std::string& node) {
  auto one = [&](const char* name, const char* type, const char* help, double value) {
    Family f{name, type, help};
    add(f, node, value);
    return f;
  };
  return {
      one("nanotrace_fleet_rounds", "counter", "Fleet freezes this node took part in",
          static_cast<double>(c.rounds.load())),
      one("nanotrace_fleet_origins", "counter", "Fleet freezes this node's processes fired",
          static_cast<double>(c.origins.load())),
      one("nanotrace_fleet_coalesced", "counter",
          "Freezes announced by other nodes within the rate interval (counted, not repeated)",
          static_cast<double>(c.coalesced.load())),
      one("nanotrace_fleet_rate_limited", "counter",
          "Local fires within the rate interval (copied when it ends or their process does, "
          "not fanned out)",
          static_cast<double>(c.rate_limited.load())),
      one("nanotrace_fleet_local_only", "counter",
          "Local fires whose announcement no server took while it was repeated (broker down)",
          static_cast<double>(c.local_only.load())),
      one("nanotrace_fleet_last_freeze_latency_seconds", "gauge",
          "Last round: from the matching record to this node's last process frozen",
          static_cast<double>(c.last_latency_ns.load()) / 1e9),
      one("nanotrace_fleet_snapshots", "counter", "Snapshot files written to the spool",
          static_cast<double>(c.snapshots.load())),
      one("nanotrace_fleet_snapshot_bytes", "counter", "Bytes of snapshot files written",
          static_cast<double>(c.snapshot_bytes.load())),
      one("nanotrace_fleet_snapshot_errors", "counter", "Snapshots that could not be written",
          static_cast<double>(c.snapshot_errors.load())),
      one("nanotrace_fleet_refused_messages", "counter",
          "Broker messages refused (malformed, or naming a path outside the spool)",
          static_cast<double>(c.refused.load())),
      one("nanotrace_broker_connected", "gauge", "1 while the broker link is up",
          c.connected.load() ? 1 : 0),
      one("nanotrace_broker_link_changes", "counter", "Broker disconnections and reconnections",
          static_cast<double>(c.link_changes.load())),
  };
}

// Shipping into ClickHouse (snapshot_shipper.hpp).
std::vector<Family> ship_families(const ShipHealth& h, const std::string& node) {
  auto one = [&](const char* name, const char* type, const char* help, double value) {
    Family f{name, type, help};
    add(f, node, value);
    return f;
  };
  return {
      one("nanotrace_fleet_shipped_snapshots", "counter",
          "Snapshots stored in ClickHouse (or found stored already)",
          static_cast<double>(h.shipped)),
      one("nanotrace_fleet_shipped_events", "counter", "Events rows of the snapshots shipped",
          static_cast<double>(h.events)),
      one("nanotrace_fleet_ship_failures", "counter",
          "Attempts to ship a snapshot that failed (server down, connection dropped, server "
          "error); the snapshot stays queued and is retried",
          static_cast<double>(h.failures)),
      one("nanotrace_fleet_ship_rejected", "counter",
          "Snapshots not shipped because they cannot be read as a trace",
          static_cast<double>(h.rejected)),
      one("nanotrace_fleet_ship_queue", "gauge",
          "Snapshots waiting to be shipped, the one in progress included",
          static_cast<double>(h.queued)),
      one("nanotrace_fleet_ship_last_error_time_seconds", "gauge",
          "CLOCK_REALTIME of the last failed or refused ship (0: none)",
          static_cast<double>(h.last_error_realtime_ns) / 1e9),
      one("nanotrace_fleet_ship_last_success_time_seconds", "gauge",
          "CLOCK_REALTIME of the last snapshot shipped (0: none)",
          static_cast<double>(h.last_success_realtime_ns) / 1e9),
  };
}

// The clock-sync daemon's view, as snapshots record it.
std::vector<Family> clock_families(const rec::ClockSync& sync, const std::string& node) {
  // An unknown bound is NaN, with source "unknown" (no daemon answered) or the daemon's name
  // (it says it is not synchronised).
  const std::string clock_labels = node + ",source=\"" + file::sync_source_name(sync.source) + "\"";
  Family bound{"nanotrace_clock_error_bound_seconds", "gauge",
               "CLOCK_REALTIME's error bound as the clock-sync daemon gives it (chrony: |offset| "
               "+ root dispersion + root delay / 2; ptp4l: |master offset|); NaN if unknown"};
  add(bound, clock_labels,
      sync.bound_ns == file::kUnknownBound ? std::nan("")
                                           : static_cast<double>(sync.bound_ns) / 1e9);
  Family synced{"nanotrace_clock_synchronised", "gauge",
                "1 while the clock-sync daemon says the clock is synchronised"};
  add(synced, clock_labels, sync.synchronised ? 1 : 0);
  Family offset{"nanotrace_clock_offset_seconds", "gauge",
                "The daemon's offset of the clock (chrony: from NTP time; ptp4l: from the master)"};
  add(offset, clock_labels, static_cast<double>(sync.offset_ns) / 1e9);
  return {bound, synced, offset};
}

// The live view's families: gauges all, named alike in both formats. Its frame is up to an
// interval old: the sample's age says how much (and that the view still samples).
std::string live_families(const LiveSampler& sampler, const std::string& node) {
  std::shared_ptr<const live::LiveFrame> frame = sampler.latest();
  if (frame == nullptr) return "";
  const uint64_t now = realtime_ns();
  const double age = static_cast<double>(now - std::min(now, frame->realtime_ns)) / 1e9;
  return live::frame_metric_families(*frame, node) +
         fmt::format(
             "# HELP nanotrace_live_sample_age_seconds Seconds since the live view last sampled "
             "the node's traced processes (the pair gauges are of that sample)\n"
             "# TYPE nanotrace_live_sample_age_seconds gauge\n"
             "nanotrace_live_sample_age_seconds{{{}}} {}\n",
             node, age);
}

}  // namespace

std::string Agent::Impl::render_metrics(MetricsFormat format) {
  const std::string node = "node=\"" + openmetrics::label_value(options.node) + "\"";
  std::vector<Family> families = process_families(locals, node);
  std::vector<Family> more = agent_families(counters, node);
  families.insert(families.end(), more.begin(), more.end());
  more = clock_families(clock->current().sync, node);
  families.insert(families.end(), more.begin(), more.end());
  if (shipper) {
    more = ship_families(shipper->health(), node);
    families.insert(families.end(), more.begin(), more.end());
  }
  // A counter's samples are NAME_total in both formats; its family (HELP and TYPE) is NAME in
  // OpenMetrics, NAME_total in Prometheus's text format, where a family is named as its
  // samples (promtool reads a sample of another name as a family without HELP).
  const bool openmetrics = format == MetricsFormat::kOpenMetrics;
  std::string out;
  for (const Family& f : families) {
    std::string name = f.name;
    if (!openmetrics && f.type == "counter") name += "_total";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, f.type);
    for (const std::string& s : f.samples) out += s + "\n";
  }
  if (live) out += live_families(*live, node);
  if (openmetrics) out += "# EOF\n";
  return out;
}

}  // namespace nanotrace::fleet
