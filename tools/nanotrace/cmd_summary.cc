// `nanotrace summary FILE [--json]` (and `nanotrace run --summary`): calls, bytes, errors and
// latency percentiles per file and operation, largest total time first.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/utf8.hpp"
#include "nanotrace/io_summary.hpp"
#include "run_commands.hpp"

namespace nanotrace::cli {
namespace {

std::string micros(uint64_t ns) { return fmt::format("{:.1f}", static_cast<double>(ns) / 1e3); }

std::string bytes_text(uint64_t b) {
  if (b >= (10ull << 30)) return fmt::format("{:.1f}G", static_cast<double>(b) / (1ull << 30));
  if (b >= (10ull << 20)) return fmt::format("{:.1f}M", static_cast<double>(b) / (1ull << 20));
  if (b >= (10ull << 10)) return fmt::format("{:.1f}K", static_cast<double>(b) / (1ull << 10));
  return std::to_string(b);
}

void print_summary_json(const Trace& trace, const IoSummary& s) {
  nlohmann::json j;
  j["processes"] = nlohmann::json::array();
  for (const ProcessInfo& p : trace.processes()) {
    j["processes"].push_back({{"pid", p.pid}, {"name", p.process_name}});
  }
  j["rows"] = nlohmann::json::array();
  for (const IoSummaryRow& r : s.rows) {
    j["rows"].push_back({{"file", r.file},
                         {"op", r.op},
                         {"calls", r.calls},
                         {"bytes", r.bytes},
                         {"errors", r.errors},
                         {"total_ns", r.total_ns},
                         {"p50_ns", r.p50_ns},
                         {"p99_ns", r.p99_ns},
                         {"p999_ns", r.p999_ns},
                         {"max_ns", r.max_ns},
                         {"from_kernel", r.from_kernel}});
  }
  j["unmatched"] = s.unmatched;
  j["lost"] = s.lost;
  j["uring_from_kernel"] = s.uring_from_kernel;
  j["kernel_lost"] = s.kernel_lost;
  j["uring_unseen"] = s.uring_unseen;
  fmt::print("{}\n", dump_json(j));
}

// Why some requests or calls are not in the rows, or are there only from the kernel.
void print_summary_notes(const IoSummary& s) {
  bool kernel_rows = false;
  for (const IoSummaryRow& r : s.rows) kernel_rows = kernel_rows || r.from_kernel;
  if (kernel_rows) {
    fmt::print(
        "* io_uring requests from the kernel's io_uring events (submit to completion): the "
        "program entered these rings with its own system calls, which the interposer cannot "
        "see{}\n",
        s.kernel_lost > 0 ? fmt::format("; {} kernel events lost", s.kernel_lost) : "");
  }
  if (s.uring_unseen > 0) {
    fmt::print(
        "{} io_uring requests were entered with the program's own system calls and are only "
        "counted in ring totals: record with `--kernel io_uring` (root) for per-request "
        "figures\n",
        s.uring_unseen);
  }
  if (s.unmatched > 0 || s.lost > 0) {
    fmt::print(
        "{} calls without an end (lost, or running when the recording ended); {} records "
        "lost\n",
        s.unmatched, s.lost);
  }
}

void print_summary_table(const Trace& trace, const IoSummary& s) {
  std::string procs;
  for (const ProcessInfo& p : trace.processes()) {
    procs += fmt::format("{}{} ({})", procs.empty() ? "" : ", ", p.pid,
                         utf8::escape_text(p.process_name));
  }
  fmt::print("{} process{}: {}\n", trace.processes().size(),
             trace.processes().size() == 1 ? "" : "es", procs);
  fmt::print("{:<40} {:<16} {:>9} {:>9} {:>7} {:>11} {:>9} {:>9} {:>9} {:>9}\n", "FILE", "OP",
             "CALLS", "BYTES", "ERRORS", "TOTAL_MS", "P50_US", "P99_US", "P99.9_US", "MAX_US");
  for (const IoSummaryRow& r : s.rows) {
    std::string file = utf8::escape_text(r.file);
    if (file.size() > 40) file = "..." + file.substr(file.size() - 37);
    const std::string op = r.from_kernel ? r.op + "*" : r.op;
    fmt::print("{:<40} {:<16} {:>9} {:>9} {:>7} {:>11.3f} {:>9} {:>9} {:>9} {:>9}\n", file, op,
               r.calls, bytes_text(r.bytes), r.errors, static_cast<double>(r.total_ns) / 1e6,
               micros(r.p50_ns), micros(r.p99_ns), micros(r.p999_ns), micros(r.max_ns));
  }
  print_summary_notes(s);
}

}  // namespace

int print_io_summary(const std::string& source, bool json) {
  auto opened = open_source(source);
  if (!opened.ok()) return fail(opened.status());
  Trace& trace = **opened;
  auto summary = summarize_io(trace);
  if (!summary.ok()) return fail(summary.status());
  if (json) {
    print_summary_json(trace, *summary);
  } else {
    print_summary_table(trace, *summary);
  }
  return 0;
}

void register_summary_command(CLI::App& app, RunCommand* c) {
  c->summary_cmd = app.add_subcommand(
      "summary", "Calls, bytes, errors and latency per file and operation (from `run`)");
  c->summary_cmd->add_option("SOURCE", c->source, "trace file (or pid, name:NAME)")->required();
  c->summary_cmd->add_flag("--json", c->json, "Print JSON");
}

}  // namespace nanotrace::cli
