// `nanotrace record SRC [SRC...] -o FILE`: the drain source (drain_source.hpp) of live
// processes named on the command line. One process is the one-process file; several go into
// one file of several processes, each drained to its end as it exits while the others go on,
// and the recording is over when all of them have exited.
//
// Every source is resolved, checked and attached to before the file is created, so a bad one
// (no such pid, a name nobody has, a process another recorder consumes) stops everything with
// one error and leaves no file. `name:NAME` takes every live process of that name: a name
// usually stands for a role (a daemon's workers), and a recording of some of them would be
// a trap.
#include <memory>

#include "base/output_file.hpp"
#include "nanotrace/record.hpp"
#include "record/recording_loop.hpp"

namespace nanotrace {
namespace {

class ProcessSource final : public rec::DrainSource {
 public:
  // Opens every process `sources` names (`one`: each is one process, as Trace::open finds
  // it; else name:NAME is every live process of that name), checks them and attaches to each.
  static Result<std::unique_ptr<ProcessSource>> open(const std::vector<std::string>& sources,
                                                     bool one, const std::string& output);

  std::vector<const Trace*> initial_processes() const override {
    std::vector<const Trace*> out;
    for (const Opened& p : procs_) out.push_back(p.trace.get());
    return out;
  }
  uint32_t file_pid() const override { return pid_; }
  bool tsc_clock() const override { return tsc_; }
  bool several() const override { return several_; }
  Status start(rec::ProcessSession& session) override {
    for (Opened& p : procs_) {
      Status s = session.add(std::move(p.trace), std::move(p.at_attach), /*attached=*/true,
                             /*owned=*/false);
      if (!s.ok()) return s;
    }
    procs_.clear();
    return Status::Ok();
  }
  Status poll(rec::ProcessSession&, rec::SourceAsks*) override { return Status::Ok(); }
  bool ended(const rec::ProcessSession& session) override { return session.all_finished(); }
  Status finish(rec::ProcessSession&, file::EndReason) override { return Status::Ok(); }

 private:
  struct Opened {
    std::unique_ptr<Trace> trace;
    std::vector<rec::SlotAtAttach> at_attach;
  };
  Status resolve(const std::string& source, bool one);
  Status check(const std::string& output) const;

  std::vector<Opened> procs_;  // until start()
  uint32_t pid_ = 0;
  bool tsc_ = true;
  bool several_ = false;
};

Result<std::unique_ptr<ProcessSource>> ProcessSource::open(const std::vector<std::string>& sources,
                                                           bool one, const std::string& output) {
  if (sources.empty()) return Status::Invalid("no process to record");
  std::unique_ptr<ProcessSource> source(new ProcessSource());
  for (const std::string& s : sources) {
    if (Status st = source->resolve(s, one); !st.ok()) return st;
  }
  if (Status s = source->check(output); !s.ok()) return s;
  for (Opened& p : source->procs_) {
    p.at_attach = rec::slots_at_attach(*p.trace);
    if (Status s = p.trace->attach_consumer(); !s.ok()) return s;
  }
  const ProcessInfo& first = source->procs_[0].trace->process();
  source->pid_ = first.pid;
  source->tsc_ = first.clock == abi::ClockKind::kTsc;
  source->several_ = source->procs_.size() > 1;
  return source;
}

// Opens what one source names (several processes for name:NAME unless `one`), skipping
// processes opened already.
Status ProcessSource::resolve(const std::string& source, bool one) {
  std::vector<std::unique_ptr<Trace>> found;
  if (!one && source.rfind("name:", 0) == 0) {
    const std::string name = source.substr(5);
    for (const ProcessEntry& e : list_processes()) {
      if (!e.error.empty() || e.info.user_name != name || !e.info.alive) continue;
      auto t = Trace::open_path(e.info.path, /*writable=*/true);
      if (!t.ok()) return Status(t.status().code(), source + ": " + t.status().message());
      found.push_back(std::move(*t));
    }
    if (found.empty()) return Status::NotFound("no live traced process named '" + name + "'");
  } else {
    auto t = Trace::open(source, /*writable=*/true);
    if (!t.ok()) {
      return one ? t.status() : Status(t.status().code(), source + ": " + t.status().message());
    }
    if ((*t)->is_file()) return Status::Invalid(source + " is a trace file, not a live process");
    found.push_back(std::move(*t));
  }
  for (std::unique_ptr<Trace>& t : found) {
    const ProcessInfo& p = t->process();
    if (!p.alive) {
      return Status::Invalid("process " + std::to_string(p.pid) +
                             " is not running (use `nanotrace recover`)");
    }
    bool twice = false;
    for (const Opened& o : procs_) twice = twice || o.trace->process().pid == p.pid;
    if (twice) continue;
    procs_.push_back({std::move(t), {}});
  }
  return Status::Ok();
}

// One file takes them all: at most 65535 processes, all on one clock, none of them the output.
Status ProcessSource::check(const std::string& output) const {
  if (procs_.size() > 0xffff) return Status::Invalid("more than 65535 processes in one file");
  const ProcessInfo& first = procs_[0].trace->process();
  for (const Opened& p : procs_) {
    if (Status same = check_not_source(output, p.trace->source_fd()); !same.ok()) return same;
    if (p.trace->process().clock != first.clock) {
      return Status::Invalid("processes " + std::to_string(first.pid) + " and " +
                             std::to_string(p.trace->process().pid) +
                             " use different clocks (NANOTRACE_CLOCK): record them apart");
    }
  }
  return Status::Ok();
}

Result<RecordSummary> record_from(const std::vector<std::string>& sources, bool one,
                                  const RecordOptions& options) {
  if (Status s = rec::check_record_options(options); !s.ok()) return s;
  auto source = ProcessSource::open(sources, one, options.output);
  if (!source.ok()) return source.status();
  return rec::record_source(**source, options);
}

}  // namespace

Result<RecordSummary> record(const std::string& source, const RecordOptions& options) {
  return record_from({source}, /*one=*/true, options);
}

Result<RecordSummary> record_processes(const std::vector<std::string>& sources,
                                       const RecordOptions& options) {
  return record_from(sources, /*one=*/false, options);
}

}  // namespace nanotrace
