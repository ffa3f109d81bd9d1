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
    if (f == e.group || f == e.full_name()) return true;
  }
  return false;
}

}  // namespace

int cmd_dump(const std::string& source, const DumpOptions& options) {
  if (options.limit < 0) {
    return fail(Status::Invalid("-n/--limit must be a number of records >= 0 (0: no limit)"));
  }
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  Trace& trace = **opened;
  for (const std::string& f : options.events) {
    bool known = false;
    for (const EventInfo& e : trace.events()) known = known || f == e.group || f == e.full_name();
    for (const EventInfo& e : trace.kernel_events()) {
      known = known || f == e.group || f == e.full_name();
    }
    if (!known) return fail(Status::NotFound("no event or group '" + f + "' in this trace"));
  }
  auto records = trace.read_all_with_kernel();
  const std::vector<ThreadStats>& threads = records->threads();
  // Text is data: JSON goes through the exporters' encoder (JSON lines are these objects),
  // text through utf8::escape_text (a string field cannot forge a line).
  exporter::JsonLineEncoder encoder;
  if (options.json) encoder.prepare(trace, threads);
  std::vector<std::string> thread_names;
  for (const ThreadStats& s : threads) thread_names.push_back(utf8::escape_text(s.info.name));
  Record r;
  uint64_t printed = 0;
  fmt::memory_buffer line;
  // A trace of several processes (`nanotrace run`) shows each record's process too.
  const bool processes = trace.processes().size() > 1;
  // A merge of several nodes (`nanotrace merge`) shows each record's node (its hostname).
  std::vector<std::string> node_of_thread;
  if (trace.nodes().size() > 1) {
    for (const ThreadStats& s : threads) {
      const uint32_t node =
          s.info.process < trace.processes().size() ? trace.processes()[s.info.process].node : 0;
      node_of_thread.push_back(utf8::escape_text(trace.nodes()[node].hostname));
    }
  }
  while (records->next(&r)) {
    if (!selected(options.events, *r.event)) continue;
    if (r.event->is_kernel) {
      line.clear();
      if (options.json) {
        encoder.encode(line, r);
      } else {
        fmt::format_to(std::back_inserter(line), "{:>15} {:>7} {:<15} {:<28} {}\n", r.time_ns,
                       r.task, fmt::format("[cpu{}]", r.cpu),
                       utf8::escape_text(r.event->full_name()),
                       utf8::escape_text(format_fields(r)));
      }
      std::fwrite(line.data(), 1, line.size(), stdout);
    } else if (options.json) {
      line.clear();
      encoder.encode(line, r);
      std::fwrite(line.data(), 1, line.size(), stdout);
    } else if (!node_of_thread.empty()) {
      fmt::print("{:>15} {:<16} {:>7} {:>7} {:<15} {:<28} {}\n", r.time_ns,
                 node_of_thread[r.thread], r.pid, threads[r.thread].info.tid,
                 thread_names[r.thread], utf8::escape_text(r.event->full_name()),
                 utf8::escape_text(format_fields(r)));
    } else if (processes) {
      fmt::print("{:>15} {:>7} {:>7} {:<15} {:<28} {}\n", r.time_ns, r.pid,
                 threads[r.thread].info.tid, thread_names[r.thread],
                 utf8::escape_text(r.event->full_name()), utf8::escape_text(format_fields(r)));
    } else {
      fmt::print("{:>15} {:>7} {:<15} {:<28} {}\n", r.time_ns, threads[r.thread].info.tid,
                 thread_names[r.thread], utf8::escape_text(r.event->full_name()),
                 utf8::escape_text(format_fields(r)));
    }
    if (options.limit > 0 && ++printed >= static_cast<uint64_t>(options.limit)) break;
  }
  std::fflush(stdout);
  if (!options.json) {
    for (const ThreadStats& s : records->threads()) {
      if (s.lost() || s.corrupt_blocks) {
        std::fprintf(stderr, "%s %u (%s): %llu records lost (%llu overwritten, %llu dropped)%s\n",
                     s.info.tid == 0 ? "kernel" : "thread", s.info.tid,
                     utf8::escape_text(s.info.name).c_str(),
                     static_cast<unsigned long long>(s.lost()),
                     static_cast<unsigned long long>(s.overwritten),
                     static_cast<unsigned long long>(s.dropped),
                     s.corrupt_blocks ? ", corrupt blocks skipped" : "");
      }
    }
  }
  return 0;
}

}  // namespace nanotrace::cli
