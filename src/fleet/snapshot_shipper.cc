// SnapshotShipper (snapshot_shipper.hpp): the queue, the retries and the markers around
// ship::Shipper.
#include "fleet/snapshot_shipper.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "base/clock.hpp"
#include "nanotrace/reader.hpp"
#include "ship/clickhouse_http.hpp"
#include "ship/shipper.hpp"

namespace nanotrace::fleet {
namespace {

using nlohmann::json;

constexpr uint64_t kMarkerMaxBytes = 64 * 1024;

}  // namespace

Result<std::string> SnapshotShipper::target(const SnapshotShipperOptions& options) {
  if (options.servers.empty()) return Status::Invalid("--ship-clickhouse: no server given");
  if (options.database.empty()) return Status::Invalid("--ship-database: empty name");
  // The URLs are checked now (a typo fails the agent's start, not every attempt), and named
  // as messages show them: without user and password.
  json servers = json::array();
  for (const std::string& url : options.servers) {
    auto client = ship::ClickHouseHttp::open(url);
    if (!client.ok()) {
      return Status::Invalid("--ship-clickhouse: " + client.status().message());
    }
    servers.push_back((*client)->url());
  }
  return json{{"servers", servers}, {"database", options.database}}.dump();
}

Result<std::unique_ptr<SnapshotShipper>> SnapshotShipper::start(
    const std::string& spool_dir, const SnapshotShipperOptions& options, Log log) {
  auto target = SnapshotShipper::target(options);
  if (!target.ok()) return target.status();
  if (options.retry_min_ns == 0 || options.retry_max_ns < options.retry_min_ns) {
    return Status::Invalid("--ship-retry-max: must be at least 0.5 s");
  }
  auto spool = Spool::open(spool_dir);
  if (!spool.ok()) return spool.status();
  std::unique_ptr<SnapshotShipper> s(
      new SnapshotShipper(std::move(*spool), options, *target, std::move(log)));
  s->thread_ = std::thread([self = s.get()] { self->run(); });
  return s;
}

SnapshotShipper::SnapshotShipper(Spool spool, SnapshotShipperOptions options, std::string target,
                                 Log log)
    : spool_(std::move(spool)),
      options_(std::move(options)),
      target_(std::move(target)),
      log_(std::move(log)) {}

SnapshotShipper::~SnapshotShipper() { stop(); }

void SnapshotShipper::stop() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SnapshotShipper::enqueue(const std::vector<std::string>& names) {
  {
    std::lock_guard lock(mu_);
    for (const std::string& n : names) {
      if (std::find(queue_.begin(), queue_.end(), n) == queue_.end()) queue_.push_back(n);
    }
  }
  wake_.notify_all();
}

ShipHealth SnapshotShipper::health() const {
  std::lock_guard lock(mu_);
  ShipHealth h = health_;
  h.queued = queue_.size();
  return h;
}

bool SnapshotShipper::marked(const std::string& name) const {
  auto text = spool_.read(marker_name(name), 0, kMarkerMaxBytes);
  if (!text.ok()) return false;
  json j = json::parse(*text, nullptr, false);
  return j.is_object() && j.contains("target") && j["target"].dump() == target_;
}

void SnapshotShipper::queue_unshipped() {
  std::vector<std::string> names = spool_.list(".nt");
  std::sort(names.begin(), names.end());
  std::vector<std::string> unshipped;
  for (const std::string& n : names) {
    if (n.rfind("tmp-", 0) != 0 && !marked(n)) unshipped.push_back(n);
  }
  if (!unshipped.empty()) {
    log_(fmt::format("{} snapshots of the spool not shipped yet: queued", unshipped.size()));
    enqueue(unshipped);
  }
}

void SnapshotShipper::failed(const std::string& why) {
  std::lock_guard lock(mu_);
  ++health_.failures;
  health_.last_error = why;
  health_.last_error_realtime_ns = sys::realtime_ns();
}

SnapshotShipper::Outcome SnapshotShipper::ship_one(const std::string& name,
                                                   std::unique_ptr<ship::Shipper>* shipper) {
  if (marked(name)) return Outcome::kShipped;  // queued twice, shipped once
  auto reject = [&](const Status& s) {
    log_("not shipping " + name + ": " + s.message());
    std::lock_guard lock(mu_);
    ++health_.rejected;
    health_.last_error = name + ": " + s.message();
    health_.last_error_realtime_ns = sys::realtime_ns();
    return Outcome::kRejected;
  };
  auto size = spool_.size(name);  // a regular file of the spool, not a link
  if (!size.ok()) return reject(size.status());
  const std::string path = spool_.dir() + "/" + name;
  auto trace = Trace::open_path(path);
  if (!trace.ok()) return reject(trace.status());
  if (*shipper == nullptr) {
    ship::ShipOptions o;
    o.servers = options_.servers;
    o.database = options_.database;
    o.cluster = options_.cluster;
    o.cancel = &stop_;
    auto connected = ship::Shipper::connect(o);
    if (!connected.ok()) {
      if (stop_.load()) return Outcome::kStopped;
      if (connected.status().code() != StatusCode::kIoError) {
        const std::string why = connected.status().message();
        log_("shipping stopped: " + why +
             " (not retried: no retry can help; the snapshots stay queued, and an agent "
             "restarted once it is fixed ships them)");
        std::lock_guard lock(mu_);
        ++health_.failures;
        health_.refused = true;
        health_.last_error = "refused, shipping stopped: " + why;
        health_.last_error_realtime_ns = sys::realtime_ns();
        return Outcome::kRefused;
      }
      log_("shipping " + name + ": " + connected.status().message() + " (retried)");
      failed(connected.status().message());
      return Outcome::kRetry;
    }
    *shipper = std::move(*connected);
  }
  auto report = (*shipper)->ship(**trace, path);
  if (stop_.load()) return Outcome::kStopped;
  if (!report.ok()) {
    // Transient errors are retried; the trace's own (a file that cannot be read the same
    // twice) and the server's refusal of its rows are not, and the next snapshot gets a new
    // connection, whose schema check finds what changed on the server.
    if (report.status().code() != StatusCode::kIoError) {
      shipper->reset();
      return reject(report.status());
    }
    log_("shipping " + name + ": " + report.status().message() + " (retried)");
    failed(report.status().message());
    return Outcome::kRetry;
  }
  const uint64_t now = sys::realtime_ns();
  json marker = {{"snapshot", name},
                 {"target", json::parse(target_)},
                 {"trace_id", fmt::format("{:016x}", report->trace_id)},
                 {"server", report->server},
                 {"already_stored", report->already_stored},
                 {"events", report->counts.events},
                 {"intervals", report->counts.intervals},
                 {"ios", report->counts.ios},
                 {"losses", report->counts.losses},
                 {"corrupt_blocks", report->damage.corrupt_blocks},
                 {"unreadable_records", report->damage.unreadable},
                 {"shipped_realtime_ns", now}};
  if (Status s = spool_.replace_file(marker_name(name), marker.dump(2) + "\n"); !s.ok()) {
    // Shipped all the same: an agent started later ships it again, and ClickHouse finds it
    // stored.
    log_("marker of " + name + ": " + s.message());
  }
  if (report->damage.damaged() && !report->already_stored) {
    log_(fmt::format(
        "{}: damaged ({} corrupt blocks, {} records unreadable): trace {:016x} "
        "holds what could be read, its losses counted as lost",
        name, report->damage.corrupt_blocks, report->damage.unreadable, report->trace_id));
  }
  if (report->already_stored) {
    log_(fmt::format("{}: trace {:016x} is stored already in {}", name, report->trace_id,
                     report->server));
  } else {
    log_(fmt::format("shipped {}: trace {:016x}, {} events, {} intervals into {}", name,
                     report->trace_id, report->counts.events, report->counts.intervals,
                     report->server));
  }
  std::lock_guard lock(mu_);
  ++health_.shipped;
  if (report->already_stored) ++health_.already_stored;
  health_.events += report->counts.events;
  health_.last_success_realtime_ns = now;
  return Outcome::kShipped;
}

void SnapshotShipper::run() {
  // The freeze path comes first: this thread takes what CPU the agent leaves.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
  queue_unshipped();
  std::unique_ptr<ship::Shipper> shipper;
  uint64_t backoff_ns = 0;
  auto retry_at = std::chrono::steady_clock::now();
  // Each wait is drawn from [backoff / 2, backoff): agents that lost the same server do not
  // all come back to it at the same moment.
  std::minstd_rand jitter(
      static_cast<uint32_t>(sys::realtime_ns() ^ static_cast<uint64_t>(gettid())));
  for (;;) {
    std::string name;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_.load() || !queue_.empty(); });
      if (backoff_ns != 0) wake_.wait_until(lock, retry_at, [&] { return stop_.load(); });
      if (stop_.load()) return;
      name = queue_.front();
    }
    const Outcome outcome = ship_one(name, &shipper);
    if (outcome == Outcome::kStopped) return;
    if (outcome == Outcome::kRefused) {
      // Nothing is tried any more; the queue stays as it is (health() shows it).
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_.load(); });
      return;
    }
    if (outcome == Outcome::kRetry) {
      shipper.reset();  // a new connection for the next attempt
      backoff_ns =
          backoff_ns == 0 ? options_.retry_min_ns : std::min(backoff_ns * 2, options_.retry_max_ns);
      const uint64_t wait_ns =
          backoff_ns / 2 + std::uniform_int_distribution<uint64_t>(0, backoff_ns / 2)(jitter);
      retry_at = std::chrono::steady_clock::now() + std::chrono::nanoseconds(wait_ns);
    } else {
      backoff_ns = 0;
    }
    std::lock_guard lock(mu_);
    queue_.pop_front();  // only this thread pops: the front is still `name`
    if (outcome == Outcome::kRetry) queue_.push_back(name);
  }
}

}  // namespace nanotrace::fleet
