// The fleet agent's state shared by its parts (agent.cc: the watcher and the broker's
// handlers; rounds.cc: freezing and snapshotting the node; agent_metrics.cc: /metrics).
// Internal header.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.hpp"
#include "base/node_identity.hpp"
#include "base/rate_policy.hpp"
#include "fleet/agent.hpp"
#include "fleet/agent_announcer.hpp"
#include "fleet/agent_live.hpp"
#include "fleet/broker.hpp"
#include "fleet/clock_watch.hpp"
#include "fleet/local_processes.hpp"
#include "fleet/message_answers.hpp"
#include "fleet/message_status.hpp"
#include "fleet/metrics_server.hpp"
#include "fleet/protocol.hpp"
#include "fleet/seen_rounds.hpp"
#include "fleet/snapshot_shipper.hpp"
#include "fleet/spool.hpp"
#include "kernel/kernel_capture.hpp"
#include "nanotrace/controller.hpp"

namespace nanotrace::fleet {

// What `fleet arm` asked, applied to processes that start later too.
struct ArmSpec {
  std::string expression;
  std::string after;
  RemoteTriggerWindow window;
  uint64_t before_ns = 0;
};

// When this node passed each step of a fleet freeze: the manifest's "timing".
using FreezeTiming = RoundTiming;

// The last fleet freeze this node took part in.
struct Round {
  std::string id;
  std::vector<Freeze> origins;  // the first, then freezes coalesced into it
  Manifest manifest;            // as written to the spool
  FreezeTiming timing;
};

// The fleet's rate policy: at most one fleet freeze per interval, no cool-down beyond it.
inline RateLimits fleet_rate_limits(uint64_t rate_ns) { return {1, rate_ns, 0}; }

// What the rate policy says of a freeze (Agent::Impl::claim_round).
enum class Claim {
  kKnown,           // its round was seen already
  kWithinInterval,  // a fleet freeze was taken less than the rate interval ago
  kTaken,           // this node freezes for it: the interval starts now
};

struct AgentCounters {
  std::atomic<uint64_t> rounds{0};        // fleet freezes this node took part in
  std::atomic<uint64_t> origins{0};       // of which it fired
  std::atomic<uint64_t> coalesced{0};     // freezes announced within the interval
  std::atomic<uint64_t> rate_limited{0};  // local fires within the interval
  std::atomic<uint64_t> local_only{0};    // fires no server took (broker down throughout)
  std::atomic<uint64_t> snapshots{0};     // snapshot files written
  std::atomic<uint64_t> snapshot_bytes{0};
  std::atomic<uint64_t> snapshot_errors{0};
  std::atomic<uint64_t> refused{0};          // malformed or refused messages
  std::atomic<uint64_t> link_changes{0};     // disconnections and reconnections
  std::atomic<uint64_t> last_latency_ns{0};  // match to this node's freeze, last round
  std::atomic<uint64_t> last_fleet_ns{0};    // origin: match to the announcement's publish
  std::atomic<bool> connected{false};
};

struct Agent::Impl {
  ~Impl() {
    if (announcer) announcer->stop();
  }
  AgentOptions options;
  sys::NodeIdentity node_identity;  // what its snapshots name (options.node, by default)
  std::optional<Spool> spool;
  // options.announce_for_ns != 0. Destroyed after the broker, whose link callback reaches it;
  // its thread, which publishes through the broker, is stopped before either (~Impl).
  std::unique_ptr<Announcer> announcer;
  std::unique_ptr<Broker> broker;
  std::unique_ptr<SnapshotShipper> shipper;  // options.ship given (outlives the metrics server)
  std::unique_ptr<LiveSampler> live;         // options.live_interval_ms != 0 (outlives it too)
  std::unique_ptr<MetricsServer> metrics;
  std::unique_ptr<ClockWatch> clock;
  LocalProcesses locals;
  AgentCounters counters;

  // Work for the watcher thread, queued by the broker's handlers.
  std::mutex tasks_mu;
  std::deque<std::function<void()>> tasks;
  void post(std::function<void()> task);

  // The rate policy's state, shared by the watcher and the broker's delivery thread, which
  // freezes the node on an announcement itself (a wake-up sooner than the watcher could).
  std::mutex round_mu;
  SeenRounds known_rounds;  // guarded by round_mu
  RatePolicy rate;          // on CLOCK_MONOTONIC; guarded by round_mu
  // Records a round as seen and applies the rate policy to it (`always`: a freeze on request,
  // which the interval does not hold back). Takes round_mu.
  Claim claim_round(const std::string& round, bool always);

  // The watcher thread's own state.
  std::optional<ArmSpec> armed;
  std::optional<Round> last_round;
  std::vector<uint32_t> deferred;        // pids fired within the interval, frozen, not copied
  std::vector<Freeze> deferred_origins;  // what they fired on
  uint64_t woke_ns = 0;                  // the watcher's last wake-up (CLOCK_REALTIME)
  // The kernel's last events (options.kernel), started with the first process found (whose
  // clock it takes); kernel_error: why it could not be.
  std::unique_ptr<kernel::KernelCapture> flight;
  std::string kernel_error;
  abi::ClockKind kernel_clock = abi::ClockKind::kTsc;  // its timestamps' (a process's clock)

  void log(const std::string& line) const;
  bool in_interval();

  // agent.cc
  void on_command(BrokerMessage&& m);
  void on_freeze(BrokerMessage&& m);
  void on_fetch(BrokerMessage&& m);
  // `top`, answered on the broker's delivery thread (the latest frame: nothing to wait for).
  std::string top_answer_body() const;
  void answer(const std::string& reply, const std::string& bytes);
  void scan();
  void follow_kernel(const std::vector<uint32_t>& added);
  void check_local_fires();
  StatusAnswer status();
  ClockStatus clock_status() const;
  ProcessesAnswer arm(const ArmSpec& spec);
  ProcessesAnswer disarm();
  void ship_round(const Manifest& manifest);
  ShipStatus ship_status() const;

  // rounds.cc
  void on_local_fire(LocalProcess& p, const TriggerInfo& info);
  // Waits options.copy_delay_ns, on the thread that just froze the node.
  void let_other_nodes_freeze() const;
  void on_remote_freeze(const Freeze& f, Claim claim, FreezeTiming timing);
  Manifest take_round(const Freeze& f, LocalProcess* origin, FreezeTiming timing = {});
  // take_round's work once the node is frozen: confirm, copy, resume (on its niced thread).
  Manifest copy_round(const Freeze& f, LocalProcess* origin, const FreezeTiming& timing);
  // timing: the round's hops for the manifest (none for a deferred copy).
  Manifest write_snapshots(const std::string& round, const std::vector<Freeze>& origins,
                           const std::vector<LocalProcess*>& which,
                           const FreezeTiming* timing = nullptr);
  void flush_deferred(bool force);
  // Processes gone since the last scan: those held back by the interval are copied now, from
  // the rings the agent's mapping still holds (they would be missing when it ends).
  void copy_deferred_of(const std::vector<std::unique_ptr<LocalProcess>>& gone);
  RoundsAnswer rounds_answer();

  // agent_metrics.cc
  std::string render_metrics(MetricsFormat format);
};

using sys::monotonic_ns;
using sys::realtime_ns;
// Repeats the node's freeze announcements (rounds.cc); before the broker connects.
void start_announcer(Agent::Impl& agent);

}  // namespace nanotrace::fleet
