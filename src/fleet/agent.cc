// The fleet agent (agent.hpp): the watcher loop, the broker's handlers and the commands.
// Freezing and snapshotting are in rounds.cc, /metrics in agent_metrics.cc.
#include "fleet/agent.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fleet/agent_state.hpp"
#include "fleet/message_top.hpp"
#include "nanotrace/trigger.hpp"

namespace nanotrace::fleet {

using nlohmann::json;

void Agent::Impl::log(const std::string& line) const {
  uint64_t now = realtime_ns();
  std::string stamp = new_round_id(now, "");
  stamp.pop_back();  // the id's '-' before the (empty) node
  std::fprintf(stderr, "%s agent %s: %s\n", stamp.c_str(), options.node.c_str(), line.c_str());
  std::fflush(stderr);
}

void Agent::Impl::post(std::function<void()> task) {
  {
    std::lock_guard lock(tasks_mu);
    tasks.push_back(std::move(task));
  }
  locals.kick();
}

bool Agent::Impl::in_interval() {
  std::lock_guard lock(round_mu);
  return rate.peek(monotonic_ns()) != RatePolicy::Verdict::kAdmitted;
}

Claim Agent::Impl::claim_round(const std::string& round, bool always) {
  std::lock_guard lock(round_mu);
  if (!known_rounds.insert(round)) return Claim::kKnown;
  const uint64_t now = monotonic_ns();
  if (always) {
    rate.force(now);
    return Claim::kTaken;
  }
  return rate.offer(now) == RatePolicy::Verdict::kAdmitted ? Claim::kTaken : Claim::kWithinInterval;
}

void Agent::Impl::answer(const std::string& reply, const std::string& bytes) {
  if (reply.empty()) return;
  Status s = broker->publish(reply, bytes);
  if (!s.ok()) log("cannot answer: " + s.message());
}

void Agent::Impl::on_command(BrokerMessage&& m) {
  auto command = Command::parse(m.data);
  if (!command.ok()) {
    ++counters.refused;
    log("refused a command: " + command.status().message());
    answer(m.reply, error_answer(options.node, command.status().message()));
    return;
  }
  if (command->op == Command::Op::kTop) {
    answer(m.reply, top_answer_body());
    return;
  }
  std::string reply = m.reply;
  Command c = *command;
  post([this, c, reply] {
    // Each answer is its command's type (message_answers.hpp), naming this node.
    std::string body;
    switch (c.op) {
      case Command::Op::kArm: {
        ArmSpec spec{c.expression, c.after, {}, c.before_ns};
        if (!c.after.empty() &&
            !Trigger::parse_window(c.after, &spec.window.after_events, &spec.window.after_ns)) {
          body = error_answer(options.node, "bad --after '" + c.after + "'");
          break;
        }
        if (c.rate_ns != 0) {
          std::lock_guard lock(round_mu);
          options.rate_ns = c.rate_ns;
          rate.set_limits(fleet_rate_limits(c.rate_ns));
        }
        body = arm(spec).to_json();
        break;
      }
      case Command::Op::kDisarm:
        body = disarm().to_json();
        break;
      case Command::Op::kSnapshot: {
        Freeze f;
        f.round = c.round;
        f.node = options.node;
        f.match_realtime_ns = realtime_ns();
        f.event = "";  // on request
        claim_round(f.round, /*always=*/true);
        body = SnapshotAnswer{options.node, "", take_round(f, nullptr)}.to_json();
        break;
      }
      case Command::Op::kStatus:
        body = status().to_json();
        break;
      case Command::Op::kRounds:
        body = rounds_answer().to_json();
        break;
      case Command::Op::kResume: {
        ResumeAnswer a{options.node, "", {}};
        locals.resume_all(&a.errors);
        body = a.to_json();
        break;
      }
      case Command::Op::kTop:
        break;  // answered at once (above)
    }
    answer(reply, body);
  });
}

std::string Agent::Impl::top_answer_body() const {
  if (!live) return error_answer(options.node, "this agent keeps no live view (--live-interval 0)");
  std::shared_ptr<const live::LiveFrame> frame = live->latest();
  if (frame == nullptr) return error_answer(options.node, "the live view has not sampled yet");
  return top_answer(options.node, *frame);
}

void Agent::Impl::on_freeze(BrokerMessage&& m) {
  FreezeTiming timing;
  timing.received_ns = realtime_ns();
  auto f = Freeze::parse(m.data);
  if (!f.ok()) {
    ++counters.refused;
    log("refused a freeze message: " + f.status().message());
    return;
  }
  if (f->node == options.node) return;  // our own (the server echoes none: no_echo)
  Freeze freeze = *f;
  // The node freezes here, on the broker's delivery thread, not a wake-up later on the
  // watcher: the signal is a few stores per process. The watcher then confirms the freeze
  // (a process's runtime may predate the signal), copies and resumes.
  const Claim claim = claim_round(freeze.round, /*always=*/false);
  if (claim == Claim::kKnown) return;
  const bool due =
      freeze.after_ns == 0 || freeze.match_realtime_ns + freeze.after_ns <= timing.received_ns;
  if (claim == Claim::kTaken && due) {
    timing.handled_ns = realtime_ns();
    locals.signal_freeze_all(nullptr);
    timing.requested_ns = realtime_ns();
  }
  // This thread has nothing else to deliver meanwhile (the freeze subject is its own).
  if (claim == Claim::kTaken) let_other_nodes_freeze();
  post([this, freeze, claim, timing] { on_remote_freeze(freeze, claim, timing); });
}

void Agent::Impl::on_fetch(BrokerMessage&& m) {
  auto request = FetchRequest::parse(m.data);
  std::string out;
  if (!request.ok()) {
    out = "E" + request.status().message();
  } else {
    auto bytes = spool->read(request->file, request->offset, request->length);
    out = bytes.ok() ? fetch_answer(*bytes, request->zstd) : "E" + bytes.status().message();
  }
  if (out[0] == 'E') {
    ++counters.refused;
    log("fetch refused: " + out.substr(1));
  }
  answer(m.reply, out);
}

ProcessesAnswer Agent::Impl::arm(const ArmSpec& spec) {
  armed = spec;
  ProcessesAnswer a{options.node, "", {}};
  for (auto& p : locals.all()) {
    Status s = p->control->arm(spec.expression, spec.window);
    ProcessResult one{p->pid, p->name, ""};
    if (s.ok()) {
      ++p->arms;
      p->seen = p->control->trigger_state();
    } else {
      one.error = s.message();
    }
    a.processes.push_back(one);
  }
  log(fmt::format("armed '{}' in {} processes", spec.expression, a.processes.size()));
  return a;
}

ProcessesAnswer Agent::Impl::disarm() {
  armed.reset();
  ProcessesAnswer a{options.node, "", {}};
  for (auto& p : locals.all()) {
    Status s = p->control->disarm();
    a.processes.push_back({p->pid, "", s.ok() ? "" : s.message()});
    p->seen = p->control->trigger_state();
  }
  return a;
}

void Agent::Impl::scan() {
  std::vector<std::unique_ptr<LocalProcess>> gone;
  std::vector<uint32_t> added = locals.scan(&gone);
  if (!gone.empty()) copy_deferred_of(gone);
  for (auto& p : locals.all()) {
    if (std::find(added.begin(), added.end(), p->pid) == added.end()) continue;
    log(fmt::format("watching process {} ({})", p->pid, p->name));
    // A restarted agent finds the trigger where it lives, in the process: it adopts it for
    // the processes that start later.
    if (!armed && p->seen == abi::TriggerState::kArmed) {
      const TriggerInfo& t = p->control->process().trigger;
      ArmSpec spec{t.expression, "", {t.after_events, t.after_ns}, 0};
      armed = spec;
      log("adopted the armed trigger '" + t.expression + "'");
    }
    if (armed && p->seen == abi::TriggerState::kNone) {
      Status s = p->control->arm(armed->expression, armed->window);
      if (s.ok()) {
        ++p->arms;
        p->seen = p->control->trigger_state();
      }
    }
  }
  if (!options.kernel.empty()) follow_kernel(added);
}

namespace {

// ftrace's filters name the kernel's thread ids; an agent in a PID namespace of its own (a
// container) knows the processes by other ids. /proc/self/status lists one id per level.
bool in_child_pid_namespace() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return false;
  char line[256];
  bool nested = false;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "NSpid:", 6) != 0) continue;
    int ids = 0;
    bool in_id = false;
    for (const char* c = line + 6; *c != 0; ++c) {
      const bool digit = *c >= '0' && *c <= '9';
      if (digit && !in_id) ++ids;
      in_id = digit;
    }
    nested = ids > 1;
    break;
  }
  std::fclose(f);
  return nested;
}

}  // namespace

void Agent::Impl::follow_kernel(const std::vector<uint32_t>& added) {
  if (!flight && kernel_error.empty() && in_child_pid_namespace()) {
    kernel_error = "the agent runs in a PID namespace of its own (ftrace names the host's ids)";
    log("snapshots without kernel events: " + kernel_error);
  }
  if (!flight && kernel_error.empty() && !added.empty()) {
    const LocalProcess* first = nullptr;
    for (auto& p : locals.all()) {
      if (p->pid == added.front()) first = p.get();
    }
    kernel::CaptureOptions f;
    f.groups = options.kernel;
    f.pid = added.front();
    if (first != nullptr) kernel_clock = first->control->process().clock;
    f.clock = kernel_clock == abi::ClockKind::kMonotonic ? file::KernelClock::kMonotonic
                                                         : file::KernelClock::kTsc;
    f.buffer_kb = options.kernel_buffer_kb;
    f.flight = true;
    auto started = kernel::KernelCapture::start(f);
    if (!started.ok()) {
      kernel_error = started.status().message();
      log("snapshots without kernel events: " + kernel_error);
      return;
    }
    flight = std::move(*started);
    log("keeping the kernel's last events in ftrace instance " + flight->instance_name());
  }
  if (!flight) return;
  for (uint32_t pid : added) flight->follow(pid);
  // The filters follow the processes' threads (new ones, and those of processes gone).
  if (Status s = flight->refresh_threads(); !s.ok()) log("kernel filters: " + s.message());
}

void Agent::Impl::check_local_fires() {
  for (auto& p : locals.all()) {
    abi::TriggerState state = p->control->trigger_state();
    if (state == p->seen) continue;
    p->seen = state;
    bool fired = state == abi::TriggerState::kFired || state == abi::TriggerState::kFrozen;
    if (!fired || p->frozen_by_agent) continue;
    auto info = p->control->trigger();
    if (!info.ok() || info->event == 0) continue;  // frozen on someone's request
    if (std::find(deferred.begin(), deferred.end(), p->pid) != deferred.end()) continue;
    on_local_fire(*p, *info);
  }
}

StatusAnswer Agent::Impl::status() {
  StatusAnswer a;
  a.node = options.node;
  for (auto& p : locals.all()) {
    RingHealth h = ring_health(*p);
    ProcessStatus one;
    one.pid = p->pid;
    one.name = p->name;
    one.trigger = trigger_state_name(p->control->trigger_state());
    one.expression = p->control->process().trigger.expression;
    one.threads = h.threads;
    one.records = h.records;
    one.history_seconds = h.history_seconds;
    one.overwritten_bytes = h.overwritten_bytes;
    one.lost = h.dropped + h.lost_no_slot + h.lost_reclaimed;
    a.processes.push_back(std::move(one));
  }
  a.connected = counters.connected.load();
  a.armed = armed ? armed->expression : "";
  a.before_ns = armed ? armed->before_ns : 0;
  a.rate_ns = options.rate_ns;
  a.rounds = counters.rounds.load();
  a.coalesced = counters.coalesced.load();
  a.rate_limited = counters.rate_limited.load();
  a.local_only = counters.local_only.load();
  a.last_latency_ns = counters.last_latency_ns.load();
  a.clock = clock_status();
  if (!options.kernel.empty()) {
    a.kernel = KernelStatus{options.kernel, flight ? flight->instance_name() : "", kernel_error};
  }
  if (shipper) a.ship = ship_status();
  return a;
}

void Agent::Impl::ship_round(const Manifest& manifest) {
  if (!shipper) return;
  std::vector<std::string> files;
  for (const ManifestProcess& p : manifest.processes) {
    if (p.copied()) files.push_back(p.file);
  }
  shipper->enqueue(files);
}

ShipStatus Agent::Impl::ship_status() const {
  ShipHealth h = shipper->health();
  ShipStatus s;
  s.servers = options.ship.servers.size();
  s.database = options.ship.database;
  s.shipped = h.shipped;
  s.already_stored = h.already_stored;
  s.events = h.events;
  s.failures = h.failures;
  s.rejected = h.rejected;
  s.queued = h.queued;
  s.last_error = h.last_error;
  s.last_error_realtime_ns = h.last_error_realtime_ns;
  s.last_success_realtime_ns = h.last_success_realtime_ns;
  return s;
}

ClockStatus Agent::Impl::clock_status() const {
  const rec::ClockSync sync = clock->current().sync;
  ClockStatus c;
  c.source = file::sync_source_name(sync.source);
  c.synchronised = sync.synchronised;
  c.offset_ns = sync.offset_ns;
  c.bound_known = sync.bound_ns != file::kUnknownBound;
  c.bound_ns = c.bound_known ? sync.bound_ns : 0;
  c.reference = sync.reference;
  return c;
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Agent::~Agent() {
  if (impl_) {
    impl_->metrics.reset();
    impl_->live.reset();
    impl_->shipper.reset();                          // cancels an attempt in progress
    if (impl_->announcer) impl_->announcer->stop();  // it publishes through the broker
    impl_->broker.reset();
  }
}

Result<std::unique_ptr<Agent>> Agent::start(const AgentOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->rate.set_limits(fleet_rate_limits(options.rate_ns));
  if (impl->options.node.empty()) impl->options.node = spool_safe(sys::hostname());
  if (!valid_name(impl->options.node)) {
    return Status::Invalid("bad node name '" + impl->options.node +
                           "' ([A-Za-z0-9_-], 64 at most)");
  }
  if (!valid_name(impl->options.fleet)) return Status::Invalid("bad fleet name");
  // The snapshots this agent writes name its node (the trace file's node identity), unless the
  // operator named it otherwise (NANOTRACE_NODE_NAME).
  impl->node_identity = sys::node_identity(impl->options.node);
  auto spool = Spool::open(options.spool);
  if (!spool.ok()) return spool.status();
  impl->spool.emplace(std::move(*spool));
  impl->clock = std::make_unique<ClockWatch>(options.clock_interval_ms);
  Impl* self = impl.get();
  if (!options.ship.servers.empty()) {
    auto shipper = SnapshotShipper::start(options.spool, options.ship,
                                          [self](const std::string& line) { self->log(line); });
    if (!shipper.ok()) return shipper.status();
    impl->shipper = std::move(*shipper);
  }
  if (options.live_interval_ms > 0) {
    live::LiveOptions view;
    view.rules = options.pairs;
    view.waiters = options.live_waiters;
    impl->live = std::make_unique<LiveSampler>(
        view, options.live_interval_ms, [self](const std::string& line) { self->log(line); });
  }
  if (!options.metrics_address.empty()) {
    auto m = MetricsServer::start(options.metrics_address,
                                  [self](MetricsFormat f) { return self->render_metrics(f); });
    if (!m.ok()) return m.status();
    impl->metrics = std::move(*m);
  }
  if (options.announce_for_ns != 0) start_announcer(*impl);
  BrokerOptions b;
  b.url = options.broker_url;
  b.credentials = options.credentials;
  b.name = "nanotrace-agent-" + impl->options.node;
  b.retry = true;
  b.send_asap = true;
  b.no_echo = true;
  b.on_link = [self](bool up, const std::string& why) {
    bool was = self->counters.connected.exchange(up);
    if (was != up) ++self->counters.link_changes;
    self->log(std::string(up ? "broker up: " : "broker down: ") + why);
    if (up && self->announcer) self->announcer->link_up();
  };
  auto broker = Broker::connect(b);
  if (!broker.ok()) return broker.status();
  impl->broker = std::move(*broker);
  const std::string& fleet = impl->options.fleet;
  Status s = impl->broker->subscribe(ctl_subject(fleet),
                                     [self](BrokerMessage&& m) { self->on_command(std::move(m)); });
  if (s.ok()) {
    s = impl->broker->subscribe(freeze_subject(fleet),
                                [self](BrokerMessage&& m) { self->on_freeze(std::move(m)); });
  }
  if (s.ok()) {
    s = impl->broker->subscribe(fetch_subject(fleet, impl->options.node),
                                [self](BrokerMessage&& m) { self->on_fetch(std::move(m)); });
  }
  if (!s.ok()) return s;
  impl->log("started: spool " + options.spool + ", broker " + options.broker_url +
            (impl->shipper ? ", shipping snapshots into ClickHouse (" +
                                 std::to_string(options.ship.servers.size()) + " shards)"
                           : ""));
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

void Agent::run(const std::atomic<bool>& stop) {
  Impl& a = *impl_;
  uint64_t next_scan = 0;
  while (!stop.load(std::memory_order_acquire)) {
    uint64_t now = monotonic_ns();
    if (now >= next_scan) {
      a.scan();
      next_scan = now + static_cast<uint64_t>(a.options.scan_ms) * 1000000ull;
    }
    for (;;) {
      std::function<void()> task;
      {
        std::lock_guard lock(a.tasks_mu);
        if (a.tasks.empty()) break;
        task = std::move(a.tasks.front());
        a.tasks.pop_front();
      }
      task();
    }
    a.check_local_fires();
    a.flush_deferred(false);
    now = monotonic_ns();
    int wait_ms = next_scan > now ? static_cast<int>((next_scan - now) / 1000000) + 1 : 0;
    if (!a.deferred.empty()) wait_ms = std::min(wait_ms, 100);
    a.locals.wait(std::min(wait_ms, 1000));
    a.woke_ns = realtime_ns();
  }
  a.flush_deferred(true);
  a.log("stopped");
}

}  // namespace nanotrace::fleet
