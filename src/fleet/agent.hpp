// The fleet agent (`nanotrace agent`), one per node. It keeps every traced process of its node
// as a flight recorder (it reads nothing from the rings while nothing happens) and links the
// node to the fleet through the broker:
//   - `fleet arm` arms the in-process trigger of every traced process, those that start later
//     included. The process where a record matches freezes itself, exactly, in-process; the
//     agent, woken by the runtime, announces the freeze on the broker and freezes the node's
//     other processes; every other agent freezes its processes on the announcement (after the
//     window asked past the match, if that moment is still to come). Each node then copies
//     its frozen rings into its spool (one snapshot file per process, and a manifest saying
//     which node, process, thread and record fired it and when every process froze), and
//     resumes them: the trigger stays armed.
//   - Rate policy: at most one fleet freeze per interval. A trigger that fires within the
//     interval freezes its own process as always and is counted; its snapshot is written
//     when the interval ends (so it is not lost), without freezing the fleet again. A freeze
//     announced by another node within the interval is counted and named in the manifest.
//   - With kernel groups, the kernel's last events of the node's processes are kept in an
//     overwrite ftrace instance (as `record --snapshot-on --kernel` keeps them), and each
//     round's window of them goes into one snapshot of the round (the origin's, else the
//     first process's).
//   - Broker down: triggers still freeze their process; the agent snapshots its node and
//     reconnects on its own. Its announcement is repeated for a few seconds (and at once when
//     its link comes back), so that nodes whose server of a cluster died with it, or whose
//     link was down, still freeze; one that no server took in that time is counted as a
//     local-only freeze.
//   - With ClickHouse servers given (options.ship), every snapshot written to the spool is
//     shipped by a thread of its own (snapshot_shipper.hpp), retried until it is stored.
//   - A live view of the node's traced processes (agent_live.hpp), sampled every
//     live_interval_ms on a thread at nice 19 without consuming the rings: /metrics gives, per
//     pair rule, the age of the oldest operation in flight (an alert fires on a stuck one),
//     the operations in flight and the recent p99 and max; the `top` command answers with the
//     latest frame (`nanotrace fleet top`).
//   - It acts on commands from the broker alone, over a connection opened with the fleet's
//     credentials; commands are a fixed set (no command runs anything), and every file name
//     a message brings is checked to be inside the spool.
//
// Thread safety: run() on one thread; stop from any (the flag).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fleet/credentials.hpp"
#include "fleet/snapshot_shipper.hpp"
#include "nanotrace/analysis.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

struct AgentOptions {
  std::string node;  // this node's name (default: the host name)
  std::string fleet = "default";
  std::string spool = "/var/spool/nanotrace";
  // The NATS servers, comma-separated: one, or several of a cluster (the client connects to
  // one of them and fails over to another).
  std::string broker_url = "nats://127.0.0.1:4222";
  Credentials credentials;
  std::string metrics_address;           // "HOST:PORT" to serve /metrics on; empty: none
  uint64_t rate_ns = 10'000'000'000ull;  // at most one fleet freeze per interval
  // How long the origin repeats a freeze's announcement (agent_announcer.hpp), every
  // announce_every_ns, for nodes that missed it (their server lost, their link down a moment).
  // 0: announced once.
  uint64_t announce_for_ns = 5'000'000'000ull;
  uint64_t announce_every_ns = 500'000'000ull;
  int scan_ms = 1000;             // how often /dev/shm is scanned for new processes
  int clock_interval_ms = 10000;  // how often the clock-sync daemon is asked
  // How long a node, once frozen, waits before its bulk work (confirming, copying, resuming):
  // where nodes share a host, the others are still being told, and their wake-ups come first.
  uint64_t copy_delay_ns = 2'000'000;
  // Kernel events kept beside the rings (`record --kernel` groups): an overwrite ftrace
  // instance with kernel_buffer_kb per CPU, whose window goes into each round's snapshots.
  std::vector<std::string> kernel;
  uint32_t kernel_buffer_kb = 4096;
  // ClickHouse to ship each snapshot into (ship.servers empty: none).
  SnapshotShipperOptions ship;
  // The live view: sampled every live_interval_ms (0: none; /metrics has no pair families and
  // `top` is answered with an error); its pair rules (empty: found from event names, as `top`
  // finds them); the operations in flight a frame lists, oldest first.
  int live_interval_ms = 1000;
  std::vector<PairRule> pairs;
  uint32_t live_waiters = 20;
};

class Agent {
 public:
  // Opens the spool, starts the metrics server and connects (a broker that cannot be reached
  // yet is retried in the background). Errors: kInvalidArgument (a bad name), kIoError.
  static Result<std::unique_ptr<Agent>> start(const AgentOptions& options);
  ~Agent();
  // Watches the node until *stop.
  void run(const std::atomic<bool>& stop);

  struct Impl;

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanotrace::fleet
