// A fleet freeze on one node (agent.hpp): announcing a local match, freezing the node's
// processes, copying the frozen rings into the spool with a manifest, resuming; and the rate
// policy (at most one fleet freeze per interval; what comes within it is counted, not lost).
#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "fleet/agent_state.hpp"
#include "nanotrace/record.hpp"
#include "record/snapshot_writer.hpp"

namespace nanotrace::fleet {

namespace {

// Waits (at most limit_ns) for a process's own trigger window to end.
bool wait_frozen(LocalProcess& p, uint64_t limit_ns) {
  uint64_t deadline = monotonic_ns() + limit_ns;
  while (p.control->trigger_state() != abi::TriggerState::kFrozen) {
    if (monotonic_ns() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace

void Agent::Impl::on_local_fire(LocalProcess& p, const TriggerInfo& info) {
  FreezeTiming timing;
  timing.woke_ns = woke_ns;
  timing.seen_ns = realtime_ns();
  ++p.fires;
  Trace& t = p.control->trace();
  Freeze f;
  f.node = options.node;
  f.pid = p.pid;
  f.tid = info.tid;
  f.seq = info.seq;
  const EventInfo* e = t.event_by_id(info.event);
  f.event = e != nullptr ? e->full_name() : "?";
  f.expression = info.expression;
  f.match_realtime_ns = t.ticks_to_realtime_ns(info.ticks);
  f.after_ns = info.after_ns;
  f.round = new_round_id(f.match_realtime_ns, options.node);
  if (claim_round(f.round, /*always=*/false) != Claim::kTaken) {
    // Counted, not lost: the process stays frozen and is copied when the interval ends.
    ++counters.rate_limited;
    deferred.push_back(p.pid);
    deferred_origins.push_back(f);
    log(fmt::format("process {} fired {} within the rate interval: counted, copied when it ends",
                    p.pid, f.event));
    return;
  }
  ++counters.origins;
  // The announcement first (written to the socket here: the broker's send_asap), then the
  // node's other processes, then the round trip that tells whether the broker has it.
  Status s = counters.connected.load() ? broker->publish(freeze_subject(options.fleet), f.to_json())
                                       : Status::IoError("the broker link is down");
  timing.published_ns = realtime_ns();
  if (f.after_ns == 0) {
    locals.signal_freeze_all(&p);
    timing.requested_ns = realtime_ns();
  }
  let_other_nodes_freeze();  // the broker's round trip below can wait too
  if (s.ok()) s = broker->flush(1000);
  if (announcer) {
    announcer->add(f.round, f.to_json(), s.ok());
    if (!s.ok()) {
      log(fmt::format("cannot announce the freeze yet ({}): repeating it for {:.1f} s", s.message(),
                      static_cast<double>(options.announce_for_ns) / 1e9));
    }
  } else if (!s.ok()) {
    ++counters.local_only;
    log("cannot announce the freeze (" + s.message() + "): this node freezes alone");
  }
  uint64_t published = timing.published_ns;
  counters.last_fleet_ns = published > f.match_realtime_ns ? published - f.match_realtime_ns : 0;
  log(fmt::format("process {} thread {} fired {} (record #{}): round {}", p.pid, f.tid, f.event,
                  f.seq, f.round));
  take_round(f, &p, timing);
}

void start_announcer(Agent::Impl& a) {
  Announcer::Hooks hooks;
  hooks.connected = [&a] { return a.counters.connected.load(); };
  hooks.publish = [&a](const std::string& text) {
    Status s = a.broker->publish(freeze_subject(a.options.fleet), text);
    return s.ok() ? a.broker->flush(500) : s;
  };
  hooks.expired = [&a](const AnnouncementSchedule::Expired& e) {
    if (e.reached) {
      a.log(fmt::format("stopped repeating the freeze of round {} ({} copies)", e.round, e.sent));
      return;
    }
    ++a.counters.local_only;
    a.log(
        fmt::format("the freeze of round {} reached no server in {:.1f} s ({} copies): this "
                    "node froze alone",
                    e.round, static_cast<double>(a.options.announce_for_ns) / 1e9, e.sent));
  };
  a.announcer = std::make_unique<Announcer>(a.options.announce_for_ns, a.options.announce_every_ns,
                                            std::move(hooks));
}

void Agent::Impl::let_other_nodes_freeze() const {
  // Measured with 8 nodes on one 2-core host (docs/fleet.md, "Where the time goes"): when each
  // node's watcher woke to copy as soon as the node froze, the last nodes' receipt of the
  // announcement waited for a CPU, and the fleet's p99 was 2.9 x the broker's own (the median
  // of six runs); 2 ms later, 1.3 x. On hosts of their own, the nodes only resume that much
  // later.
  if (options.copy_delay_ns != 0) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(options.copy_delay_ns));
  }
}

void Agent::Impl::on_remote_freeze(const Freeze& f, Claim claim, FreezeTiming timing) {
  if (claim == Claim::kWithinInterval) {
    ++counters.coalesced;
    if (!last_round) return;  // not possible: an interval starts with a round
    last_round->origins.push_back(f);
    last_round->manifest.origins.push_back(f);
    Status s = spool->replace_file(last_round->id + "." + options.node + ".json",
                                   last_round->manifest.to_json(2));
    if (!s.ok()) log("manifest: " + s.message());
    log("freeze " + f.round + " from " + f.node + " within the rate interval: counted in " +
        last_round->id);
    return;
  }
  if (timing.handled_ns == 0) timing.handled_ns = realtime_ns();  // a window to wait out
  log("freeze " + f.round + " from node " + f.node);
  take_round(f, nullptr, timing);
}

Manifest Agent::Impl::take_round(const Freeze& f, LocalProcess* origin, FreezeTiming timing) {
  ++counters.rounds;
  last_round = Round{f.round, {f}, {}, timing};
  // A match with a time window: every node keeps that window past the match, this node's
  // other processes too when the match is here (the origin ends its window itself).
  if (f.after_ns != 0) {
    uint64_t until = f.match_realtime_ns + f.after_ns, now = realtime_ns();
    if (until > now) {
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(std::min<uint64_t>(until - now, 1000000000ull)));
    }
  }
  // The node is frozen (signalled on receipt, or beside the announcement): what is left is
  // bulk work that can wait, confirming, copying and resuming. It runs on a thread at nice
  // 10, so that the node's programs, and on a shared host the other agents' broker threads
  // still freezing their nodes, have the CPU first. (A thread of its own: an agent that is
  // not root may lower its priority, but not raise it again.)
  Manifest manifest;
  std::thread worker([&] {
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
    manifest = copy_round(f, origin, timing);
  });
  worker.join();
  return manifest;
}

Manifest Agent::Impl::copy_round(const Freeze& f, LocalProcess* origin,
                                 const FreezeTiming& timing) {
  last_round->timing.copied_ns = realtime_ns();
  std::vector<std::string> errors;
  // Already signalled: this confirms it.
  uint64_t* requested = timing.requested_ns == 0 ? &last_round->timing.requested_ns : nullptr;
  locals.freeze_all(origin, &errors, requested);
  if (origin != nullptr && !wait_frozen(*origin, f.after_ns + 1000000000ull)) {
    // A count window that the process does not fill in a second: end it here.
    auto seq = origin->control->post_freeze();
    Status s = seq.ok() ? origin->control->await_answer(*seq) : seq.status();
    if (!s.ok()) log("freeze of the origin: " + s.message());
  }
  for (const std::string& e : errors) log("freeze: " + e);
  std::vector<LocalProcess*> all;
  for (auto& p : locals.all()) all.push_back(p.get());
  Manifest manifest = write_snapshots(f.round, {f}, all, &last_round->timing);
  last_round->manifest = manifest;
  std::vector<std::string> resume_errors;
  locals.resume_all(&resume_errors);
  for (const std::string& e : resume_errors) log("resume: " + e);
  return manifest;
}

Manifest Agent::Impl::write_snapshots(const std::string& round, const std::vector<Freeze>& origins,
                                      const std::vector<LocalProcess*>& which,
                                      const FreezeTiming* timing) {
  Manifest manifest;
  std::vector<ManifestProcess>& processes = manifest.processes;
  uint64_t last_freeze = 0;
  // The kernel's window goes into one snapshot of the round (a merged file keeps one
  // machine's kernel events): the local origin's, else the first process's on its clock.
  const LocalProcess* kernel_to = nullptr;
  for (LocalProcess* p : which) {
    if (!flight || p->control->process().clock != kernel_clock) continue;
    bool origin = std::any_of(origins.begin(), origins.end(), [&](const Freeze& f) {
      return f.node == options.node && f.pid == p->pid;
    });
    if (kernel_to == nullptr || origin) kernel_to = p;
    if (origin) break;
  }
  // The clock-sync daemon's view as the agent's watch last read it (at most its interval old),
  // not asked again per file: its client's fork and exec are CPU that the nodes still
  // freezing need.
  const ClockWatch::Reading clock_reading = clock->current();
  const rec::ClockSync* sync = clock_reading.read_monotonic_ns != 0 ? &clock_reading.sync : nullptr;
  for (LocalProcess* p : which) {
    auto info = p->control->trigger();  // re-reads the header: frozen_ticks
    if (!info.ok() || info->state != abi::TriggerState::kFrozen) {
      ManifestProcess one;
      one.pid = p->pid;
      one.error = "not frozen";
      processes.push_back(one);
      continue;
    }
    Trace& t = p->control->trace();
    uint64_t frozen = t.ticks_to_realtime_ns(info->frozen_ticks);
    last_freeze = std::max(last_freeze, frozen);
    std::string name = fmt::format("{}.{}.{}.nt", round, options.node, p->pid);
    ManifestProcess one;
    one.pid = p->pid;
    one.name = p->name;
    one.file = name;
    one.frozen_realtime_ns = frozen;
    one.history_seconds = ring_health(*p, info->frozen_ticks).history_seconds;
    auto path = spool->new_path(name);
    kernel::KernelCapture* window = p == kernel_to ? flight.get() : nullptr;
    Result<RecordSummary> written =
        path.ok()
            ? rec::write_snapshot_of({&t}, *path, /*compress=*/false, window, sync, &node_identity)
            : Result<RecordSummary>(path.status());
    if (!written.ok()) {
      ++counters.snapshot_errors;
      one.error = written.status().message();
      log("snapshot of " + std::to_string(p->pid) + ": " + written.status().message());
    } else {
      ++counters.snapshots;
      counters.snapshot_bytes += written->file_bytes;
      one.bytes = written->file_bytes;
      one.records = written->records;
      if (window != nullptr) {
        one.has_kernel = true;
        one.kernel_pages = written->kernel_pages;
        one.kernel_lost = written->kernel_lost;
      }
    }
    processes.push_back(one);
  }
  uint64_t match = origins.empty() ? 0 : origins.front().match_realtime_ns;
  uint64_t latency = last_freeze > match ? last_freeze - match : 0;
  counters.last_latency_ns = latency;
  manifest.round = round;
  manifest.node = options.node;
  manifest.fleet = options.fleet;
  manifest.origins = origins;
  manifest.before_ns = armed ? armed->before_ns : 0;
  manifest.freeze_realtime_ns = last_freeze;
  manifest.latency_ns = latency;
  if (timing != nullptr) manifest.timing = *timing;
  Status s = spool->replace_file(round + "." + options.node + ".json", manifest.to_json(2));
  if (!s.ok()) log("manifest: " + s.message());
  ship_round(manifest);
  log(fmt::format("round {}: {} processes copied, frozen {:.3f} ms after the match", round,
                  processes.size(), static_cast<double>(latency) / 1e6));
  return manifest;
}

void Agent::Impl::flush_deferred(bool force) {
  if (deferred.empty() || (!force && in_interval())) return;
  std::vector<LocalProcess*> which;
  std::vector<Freeze> origins;
  for (auto& p : locals.all()) {
    if (std::find(deferred.begin(), deferred.end(), p->pid) != deferred.end()) {
      which.push_back(p.get());
    }
  }
  origins.swap(deferred_origins);
  deferred.clear();
  if (which.empty()) return;
  std::string round =
      new_round_id(origins.empty() ? realtime_ns() : origins.front().match_realtime_ns,
                   options.node) +
      "-local";
  write_snapshots(round, origins, which);
  for (LocalProcess* p : which) {
    Status s = p->control->resume();
    if (!s.ok()) log("resume: " + s.message());
    p->seen = p->control->trigger_state();
  }
}

void Agent::Impl::copy_deferred_of(const std::vector<std::unique_ptr<LocalProcess>>& gone) {
  for (const auto& p : gone) {
    auto it = std::find(deferred.begin(), deferred.end(), p->pid);
    if (it == deferred.end()) continue;
    const size_t i = static_cast<size_t>(it - deferred.begin());
    const Freeze origin = deferred_origins[i];
    deferred.erase(it);
    deferred_origins.erase(deferred_origins.begin() + static_cast<std::ptrdiff_t>(i));
    const std::string round = new_round_id(origin.match_realtime_ns, options.node) + "-local";
    log(fmt::format("process {} ended within the rate interval: copying its firing now ({})",
                    p->pid, round));
    write_snapshots(round, {origin}, {p.get()});
  }
}

RoundsAnswer Agent::Impl::rounds_answer() {
  RoundsAnswer a{options.node, "", {}};
  std::vector<std::string> names = spool->list(".json");
  std::sort(names.begin(), names.end());
  if (names.size() > 64) names.erase(names.begin(), names.end() - 64);
  for (const std::string& name : names) {
    if (name.rfind("tmp-", 0) == 0) continue;
    auto text = spool->read(name, 0, 1 << 20);
    if (!text.ok()) continue;
    // Only what a collector can read: a manifest this agent's version cannot is left out.
    auto manifest = Manifest::parse(*text);
    if (manifest.ok()) {
      a.rounds.push_back(std::move(*manifest));
    } else {
      log(name + ": " + manifest.status().message());
    }
  }
  return a;
}

}  // namespace nanotrace::fleet
