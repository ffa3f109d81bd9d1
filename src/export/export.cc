// export_trace(): one merged pass over a trace feeding the writer of the chosen format, and
// the names of the formats.
#include "nanotrace/export.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "base/output_file.hpp"
#include "export/writers.hpp"

namespace nanotrace {

Result<ExportFormat> parse_export_format(std::string_view name) {
  if (name == "ctf") return ExportFormat::kCtf;
  if (name == "chrome") return ExportFormat::kChrome;
  if (name == "perfetto") return ExportFormat::kPerfetto;
  if (name == "csv") return ExportFormat::kCsv;
  if (name == "jsonl") return ExportFormat::kJsonl;
  return Status::Invalid(fmt::format(
      "unknown export format '{}' (expected ctf, chrome, perfetto, csv or jsonl)", name));
}

const char* export_format_name(ExportFormat format) {
  switch (format) {
    case ExportFormat::kCtf:
      return "ctf";
    case ExportFormat::kChrome:
      return "chrome";
    case ExportFormat::kPerfetto:
      return "perfetto";
    case ExportFormat::kCsv:
      return "csv";
    case ExportFormat::kJsonl:
      return "jsonl";
  }
  return "unknown";
}

Status exporter::no_records(const Trace& trace) {
  return Status::NotFound(fmt::format("the trace of process {} ({}) holds no records",
                                      trace.process().pid, trace.process().path));
}

void exporter::count_losses(const std::vector<ThreadStats>& threads, ExportSummary* summary) {
  for (const ThreadStats& t : threads) {
    summary->lost += t.lost();
    summary->corrupt_blocks += t.corrupt_blocks;
  }
  summary->threads = static_cast<uint32_t>(threads.size());
}

Result<ExportSummary> export_trace(Trace& trace, const ExportOptions& options) {
  if (options.output.empty()) return Status::Invalid("no output given (-o)");
  if (options.format == ExportFormat::kCtf && options.output == "-") {
    return Status::Invalid("CTF output is a directory; '-' (standard output) is not possible");
  }
  if (options.output != "-") {
    Status st = check_not_source(options.output, trace.source_fd());
    if (!st.ok()) return st;
  }
  std::vector<ResolvedPair> slices;
  for (const PairRule& rule : options.slices) {
    auto resolved = resolve_pair(trace, rule);
    if (!resolved.ok()) return resolved.status();
    slices.push_back(std::move(*resolved));
  }
  std::unique_ptr<exporter::RecordWriter> writer;
  switch (options.format) {
    case ExportFormat::kCtf:  // per thread, from raw spans
      return exporter::export_ctf(trace, options);
    case ExportFormat::kChrome:
      writer = exporter::make_chrome_writer(options, std::move(slices));
      break;
    case ExportFormat::kPerfetto:
      // Every record an instant: encoded from its bytes, without a Record. From a trace
      // file only: a live segment's span streams copy up to 256 KiB each (read_spans is
      // for one stream at a time), where a merged read shares 16 MiB among them.
      if (trace.is_file() && slices.empty() && trace.kernel_events().empty()) {
        return exporter::export_perfetto_instants(trace, options);
      }
      writer = exporter::make_perfetto_writer(options, std::move(slices));
      break;
    case ExportFormat::kCsv:
      writer = exporter::make_csv_writer(options);
      break;
    case ExportFormat::kJsonl:
      writer = exporter::make_jsonl_writer(options);
      break;
  }
  // Kernel events (a file recorded with --kernel) go to every format but CTF, merged by time.
  auto source = trace.read_all_with_kernel();
  // Each record is encoded once, where the merge holds it (next_ref: no copy).
  const Record* record = source->next_ref();
  if (record == nullptr) return exporter::no_records(trace);
  Status st = writer->begin(trace, *source);
  if (!st.ok()) return st;
  ExportSummary summary;
  do {
    writer->write(*record);
    ++summary.records;
  } while ((record = source->next_ref()) != nullptr);
  st = writer->finish(*source, &summary);
  if (!st.ok()) return st;
  exporter::count_losses(source->threads(), &summary);
  return summary;
}

}  // namespace nanotrace
