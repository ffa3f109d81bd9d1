// `nanotrace stats`: per event and per thread counts, rates and losses of what the rings
// hold now (analyze_stats), plus what the process counted itself (records written, dropped,
// lost for want of a thread slot), and the kernel that recorded the kernel events, if any.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/utf8.hpp"
#include "commands.hpp"
#include "nanotrace/analysis.hpp"
#include "node_output.hpp"

namespace nanotrace::cli {

namespace {

// Corrupt blocks over the trace's threads, and the records they made unreadable.
struct Corrupt {
  uint64_t blocks = 0, unreadable = 0;
};
Corrupt corrupt_of(const std::vector<ThreadStats>& threads) {
  Corrupt c;
  for (const ThreadStats& s : threads) {
    c.blocks += s.corrupt_blocks;
    c.unreadable += s.unreadable;
  }
  return c;
}

void print_stats_json(const Trace& trace, const TraceStats& st) {
  const std::vector<ThreadStats>& threads = st.threads;
  const Corrupt corrupt = corrupt_of(threads);
  const ProcessInfo& p = trace.process();
  nlohmann::json events = nlohmann::json::array();
  for (const EventCount& e : st.events) {
    events.push_back({{"event", utf8::valid(e.event)},
                      {"count", e.rate.count},
                      {"rate_per_s", e.rate.per_second()}});
  }
  nlohmann::json ths = nlohmann::json::array();
  for (size_t i = 0; i < threads.size(); ++i) {
    const ThreadStats& s = threads[i];
    const ProcessInfo& owner = trace.processes()[s.info.process];
    ths.push_back({{"pid", s.info.pid},
                   {"process", utf8::valid(trace.processes()[s.info.process].process_name)},
                   {"tid", s.info.tid},
                   {"name", utf8::valid(s.info.name)},
                   {"state", s.info.state == abi::SlotState::kExited ? "exited" : "active"},
                   {"records", s.records},
                   {"written", s.info.written},
                   {"rate_per_s", st.thread_rates[i].per_second()},
                   {"lost", s.lost()},
                   {"overwritten", s.overwritten},
                   {"dropped", s.dropped},
                   {"corrupt_blocks", s.corrupt_blocks},
                   {"unreadable", s.unreadable}});
    if (owner.node < trace.nodes().size()) {
      ths.back()["node"] = utf8::valid(trace.nodes()[owner.node].hostname);
    }
  }
  nlohmann::json out = {{"pid", p.pid},
                        {"alive", p.alive},
                        {"mode", mode_name(p.mode)},
                        {"records", st.total.count},
                        {"span_s", st.span_s()},
                        {"rate_per_s", st.total.per_second()},
                        {"lost", st.lost},
                        {"lost_no_slot", st.lost_no_slot},
                        {"lost_reclaimed", st.lost_reclaimed},
                        {"corrupt_blocks", corrupt.blocks},
                        {"unreadable", corrupt.unreadable},
                        {"processes", trace.processes().size()},
                        {"events", events},
                        {"threads", ths}};
  if (!trace.nodes().empty()) {
    out["nodes"] = nodes_json(trace);
    out["origin"] = origin_json(trace);
  }
  if (!trace.kernel_events().empty()) {
    const Trace::KernelSystem k = trace.kernel_system();
    out["kernel"] = {{"sysname", utf8::valid(k.sysname)},
                     {"release", utf8::valid(k.release)},
                     {"version", utf8::valid(k.version)},
                     {"machine", utf8::valid(k.machine)}};
  }
  fmt::print("{}\n", dump_json(out));
}

// The process line, the kernel that recorded the kernel events, and the process's losses.
void print_stats_header(const Trace& trace, const TraceStats& st) {
  const ProcessInfo& p = trace.process();
  fmt::print("process {} ({}), {}, mode {}: {} records over {:.3f} s ({:.0f}/s), {} lost\n", p.pid,
             utf8::escape_text(p.user_name.empty() ? p.process_name : p.user_name),
             p.alive ? "running" : "not running", mode_name(p.mode), st.total.count, st.span_s(),
             st.total.per_second(), st.lost);
  if (const Corrupt c = corrupt_of(st.threads); c.blocks > 0) {
    fmt::print("  damaged: {} corrupt blocks skipped, {} records unreadable (counted as lost)\n",
               c.blocks, c.unreadable);
  }
  if (!trace.kernel_events().empty()) {
    const Trace::KernelSystem k = trace.kernel_system();
    if (k.sysname.empty() && k.release.empty()) {
      fmt::print(
          "  kernel events recorded on an unnamed kernel (a file from before uname was kept)\n");
    } else {
      fmt::print("  kernel events recorded on {} {} {} {}\n", utf8::escape_text(k.sysname),
                 utf8::escape_text(k.release), utf8::escape_text(k.version),
                 utf8::escape_text(k.machine));
    }
  }
  if (st.lost_no_slot || st.lost_reclaimed) {
    fmt::print("  lost for want of a thread slot: {}, in reused slots: {}{}\n", st.lost_no_slot,
               st.lost_reclaimed, trace.processes().size() > 1 ? " (all processes)" : "");
  }
}

// Records per process of a trace of several.
void print_process_table(const Trace& trace, const std::vector<ThreadStats>& threads) {
  const bool nodes = trace.nodes().size() > 1;
  fmt::print("\n{} processes:\n{:>8} {:>8} {:<16} {:>12} {}\n", trace.processes().size(), "PID",
             "PARENT", "PROCESS", "RECORDS", nodes ? "NODE" : "");
  std::vector<uint64_t> per_process(trace.processes().size());
  for (const ThreadStats& s : threads) per_process[s.info.process] += s.records;
  for (size_t i = 0; i < trace.processes().size(); ++i) {
    const ProcessInfo& q = trace.processes()[i];
    fmt::print("{:>8} {:>8} {:<16} {:>12} {}\n", q.pid, q.parent_pid,
               utf8::escape_text(q.process_name), per_process[i],
               nodes ? utf8::escape_text(trace.nodes()[q.node].hostname) : std::string());
  }
}

void print_stats_text(const Trace& trace, const TraceStats& st) {
  const std::vector<ThreadStats>& threads = st.threads;
  print_stats_header(trace, st);
  fmt::print("\n{:<32} {:>12} {:>14}\n", "EVENT", "COUNT", "RATE/s");
  for (const EventCount& e : st.events) {
    fmt::print("{:<32} {:>12} {:>14.0f}\n", utf8::escape_text(e.event), e.rate.count,
               e.rate.per_second());
  }
  print_nodes(trace);
  if (trace.processes().size() > 1) print_process_table(trace, threads);
  fmt::print("\n{:>8} {:>8} {:<16} {:<7} {:>12} {:>12} {:>14} {:>12} {:>10} {:>10} {:>8}\n", "PID",
             "TID", "THREAD", "STATE", "RECORDS", "WRITTEN", "RATE/s", "LOST", "OVERWR", "DROPPED",
             "CORRUPT");
  for (size_t i = 0; i < threads.size(); ++i) {
    const ThreadStats& s = threads[i];
    fmt::print("{:>8} {:>8} {:<16} {:<7} {:>12} {:>12} {:>14.0f} {:>12} {:>10} {:>10} {:>8}\n",
               s.info.pid, s.info.tid, utf8::escape_text(s.info.name),
               s.info.state == abi::SlotState::kExited ? "exited" : "active", s.records,
               s.info.written, st.thread_rates[i].per_second(), s.lost(), s.overwritten, s.dropped,
               s.corrupt_blocks);
  }
}

}  // namespace

int cmd_stats(const std::string& source, bool json) {
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  Trace& trace = **opened;
  const TraceStats st = analyze_stats(trace);
  if (json) {
    print_stats_json(trace, st);
  } else {
    print_stats_text(trace, st);
  }
  return 0;
}

}  // namespace nanotrace::cli
