// `nanotrace dump`: every record in the rings, merged by time, as text or JSON lines,
// followed by the per-thread loss report.
#include <fmt/format.h>

#include <cstdio>

#include "base/utf8.hpp"
#include "commands.hpp"
#include "export/json_lines.hpp"
#include "export/output.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::cli {
namespace {

// An event filter: "group:event" or "group".
bool selected(const std::vector<std::string>& filters, const EventInfo& e) {
  if (filters.empty()) return true;
  for (const std::string& f : filters) {
    if (e.named_by(f)) return true;
  }
  return false;
}

// Every filter names a group or event of the trace (user or kernel).
Status check_filters(Trace& trace, const std::vector<std::string>& filters) {
  for (const std::string& f : filters) {
    bool known = false;
    for (const EventInfo& e : trace.events()) known = known || e.named_by(f);
    for (const EventInfo& e : trace.kernel_events()) known = known || e.named_by(f);
    if (!known) return Status::NotFound("no event or group '" + f + "' in this trace");
  }
  return Status::Ok();
}

// One record as a line. Text is data: JSON goes through the exporters' encoder (JSON lines are
// these objects), text through utf8::escape_text (a string field cannot forge a line).
class LinePrinter {
 public:
  LinePrinter(Trace& trace, const std::vector<ThreadStats>& threads, bool json)
      : threads_(threads), json_(json), processes_(trace.processes().size() > 1) {
    if (json) encoder_.prepare(trace, threads);
    for (const ThreadStats& s : threads) thread_names_.push_back(utf8::escape_text(s.info.name));
    // A merge of several nodes (`nanotrace merge`) shows each record's node (its hostname).
    if (trace.nodes().size() > 1) {
      for (const ThreadStats& s : threads) {
        const uint32_t node =
            s.info.process < trace.processes().size() ? trace.processes()[s.info.process].node : 0;
        node_of_thread_.push_back(utf8::escape_text(trace.nodes()[node].hostname));
      }
    }
  }

  void print(const Record& r) {
    line_.clear();
    auto out = std::back_inserter(line_);
    if (json_) {
      encoder_.encode(line_, r);
      std::fwrite(line_.data(), 1, line_.size(), stdout);
      return;
    }
    const std::string event = utf8::escape_text(r.event->full_name());
    if (r.event->is_kernel) {
      fmt::format_to(out, "{:>15} {:>7} {:<15} {:<28} {}\n", r.time_ns, r.task,
                     fmt::format("[cpu{}]", r.cpu), event, utf8::escape_text(format_fields(r)));
    } else {
      const uint32_t tid = threads_[r.thread].info.tid;
      fmt::format_to(out, "{:>15} ", r.time_ns);
      if (!node_of_thread_.empty()) fmt::format_to(out, "{:<16} ", node_of_thread_[r.thread]);
      // A trace of several processes (`nanotrace run`, a merge) shows each record's process.
      if (!node_of_thread_.empty() || processes_) fmt::format_to(out, "{:>7} ", r.pid);
      fmt::format_to(out, "{:>7} {:<15} {:<28} {}\n", tid, thread_names_[r.thread], event,
                     utf8::escape_text(format_fields(r)));
    }
    std::fwrite(line_.data(), 1, line_.size(), stdout);
  }

 private:
  const std::vector<ThreadStats>& threads_;
  const bool json_;
  const bool processes_;
  exporter::JsonLineEncoder encoder_;
  std::vector<std::string> thread_names_;
  std::vector<std::string> node_of_thread_;
  fmt::memory_buffer line_;
};

void report_losses(const std::vector<ThreadStats>& threads) {
  for (const ThreadStats& s : threads) {
    if (!s.lost() && !s.corrupt_blocks) continue;
    std::fprintf(
        stderr, "%s %u (%s): %llu records lost (%llu overwritten, %llu dropped)%s\n",
        s.info.tid == 0 ? "kernel" : "thread", s.info.tid, utf8::escape_text(s.info.name).c_str(),
        static_cast<unsigned long long>(s.lost()), static_cast<unsigned long long>(s.overwritten),
        static_cast<unsigned long long>(s.dropped),
        s.corrupt_blocks ? fmt::format(", {} corrupt blocks skipped, {} records unreadable",
                                       s.corrupt_blocks, s.unreadable)
                               .c_str()
                         : "");
  }
}

}  // namespace

int cmd_dump(const std::string& source, const DumpOptions& options) {
  if (options.limit < 0) {
    return fail(Status::Invalid("-n/--limit must be a number of records >= 0 (0: no limit)"));
  }
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  Trace& trace = **opened;
  if (Status s = check_filters(trace, options.events); !s.ok()) return fail(s);
  auto records = trace.read_all_with_kernel();
  LinePrinter printer(trace, records->threads(), options.json);
  Record r;
  uint64_t printed = 0;
  while (records->next(&r)) {
    if (!selected(options.events, *r.event)) continue;
    printer.print(r);
    if (options.limit > 0 && ++printed >= static_cast<uint64_t>(options.limit)) break;
  }
  std::fflush(stdout);
  if (!options.json) report_losses(records->threads());
  return 0;
}

}  // namespace nanotrace::cli
