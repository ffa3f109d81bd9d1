// The agent's shipping of its snapshots into ClickHouse (`agent --ship-clickhouse`): one thread
// of its own takes the spool's snapshot files from a queue and ships each with ship::Shipper
// (all of a trace or none of it, stored once by trace id), so that freezing, resuming and
// answering the broker never wait for ClickHouse. It runs at a lower priority (nice 10) than
// the agent's freeze path.
//   - A transient failure (server down, connection dropped, a server error of a passing kind:
//     ship/clickhouse_answer.hpp) keeps the snapshot queued: it goes to the back of the queue
//     and the thread waits before the next attempt (0.5 s, doubling up to retry_max_ns, each
//     wait drawn between half and all of that), on a new connection. A retry is safe: a trace
//     stored already is not sent again, and rows an interrupted attempt left are replaced.
//   - A refusal when connecting (credentials, permissions, a schema that differs, an unknown
//     cluster: no retry can help) stops shipping: nothing more is tried, the snapshots stay
//     queued and unmarked (an agent restarted once it is fixed ships them), health() says
//     `refused` and last_error why, and the log says it once.
//   - A file that cannot be read as a trace, or a trace the server refuses (a refusal of its
//     own rows), is dropped from the queue, counted and logged: no retry could ship it. It
//     stays unmarked; the next connection is a new one (which checks the schema again).
//   - After a success, `<snapshot>.shipped` (0600, JSON: the trace id, the target, the rows)
//     says so; the snapshot itself is never changed or removed. At start, every snapshot of
//     the spool without a marker naming the same target (servers and database) is queued, in
//     name order (round ids begin with the time); one shipped to another target is shipped
//     again there.
//   - stop() (and the destructor) ends an attempt in progress within about a second, whatever
//     the server does: no shutdown waits for a dead or hung server.
//
// Thread safety: enqueue(), health() and stop() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fleet/spool.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::ship {
class Shipper;
}

namespace nanotrace::fleet {

struct SnapshotShipperOptions {
  std::vector<std::string> servers;  // one ClickHouse HTTP URL per shard; empty: no shipping
  std::string database = "nanotrace";
  std::string cluster;  // the Distributed tables' cluster ("": one server, Merge tables)
  uint64_t retry_min_ns = 500'000'000ull;
  uint64_t retry_max_ns = 30'000'000'000ull;
};

// What /metrics and `fleet status` show.
struct ShipHealth {
  uint64_t shipped = 0;                   // snapshots stored (or found stored already)
  uint64_t already_stored = 0;            // of which ClickHouse held already
  uint64_t events = 0;                    // events rows stored
  uint64_t failures = 0;                  // attempts that failed (the snapshot stays queued)
  uint64_t rejected = 0;                  // snapshots dropped: unreadable, or refused
  bool refused = false;                   // a server refused: shipping stopped (last_error)
  uint64_t queued = 0;                    // snapshots waiting, the one in progress included
  uint64_t last_error_realtime_ns = 0;    // 0: none yet
  uint64_t last_success_realtime_ns = 0;  // 0: none yet
  std::string last_error;
};

class SnapshotShipper {
 public:
  using Log = std::function<void(const std::string&)>;
  // Checks the URLs and starts the thread, which first queues the spool's snapshots not
  // shipped to this target yet. Nothing is connected here: a server down at start is retried.
  // Errors: kInvalidArgument (no server, a bad URL, an empty database), kIoError (the spool).
  static Result<std::unique_ptr<SnapshotShipper>> start(const std::string& spool_dir,
                                                        const SnapshotShipperOptions& options,
                                                        Log log);
  ~SnapshotShipper();  // stop()
  SnapshotShipper(const SnapshotShipper&) = delete;
  SnapshotShipper& operator=(const SnapshotShipper&) = delete;

  // Queues spool files (snapshot names) to ship; returns at once.
  void enqueue(const std::vector<std::string>& names);
  ShipHealth health() const;
  // Ends the thread (an attempt in progress is cancelled; the queue is not shipped).
  void stop();

  // The marker file that says a snapshot was shipped, and the target its "target" names (JSON:
  // the servers' URLs without user and password, and the database).
  static std::string marker_name(const std::string& snapshot) { return snapshot + ".shipped"; }
  static Result<std::string> target(const SnapshotShipperOptions& options);

 private:
  enum class Outcome { kShipped, kRejected, kRetry, kRefused, kStopped };
  SnapshotShipper(Spool spool, SnapshotShipperOptions options, std::string target, Log log);
  void run();
  void queue_unshipped();
  bool marked(const std::string& name) const;
  Outcome ship_one(const std::string& name, std::unique_ptr<ship::Shipper>* shipper);
  void failed(const std::string& why);

  Spool spool_;
  SnapshotShipperOptions options_;
  std::string target_;  // the servers (without passwords) and database, as markers name them
  Log log_;
  std::atomic<bool> stop_{false};

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::string> queue_;  // its front is the snapshot in progress
  ShipHealth health_;
  std::thread thread_;
};

}  // namespace nanotrace::fleet
