// export_trace(): one merged pass over a trace feeding the writer of the chosen format, plus
// the small parsers and checks shared by the exporters and the analyses (formats, pair
// rules, resolving event names against a trace's event table).
#include "nanotrace/export.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/output_file.hpp"
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

Result<PairRule> parse_pair_rule(std::string_view text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    parts.emplace_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) {
    return Status::Invalid(fmt::format(
        "bad pair rule '{}': expected BEGIN,END,KEY (e.g. io:submit,io:complete,req)", text));
  }
  return PairRule{parts[0], parts[1], parts[2]};
}

std::vector<std::string> known_event_names(const Trace& trace) {
  std::vector<std::string> names;
  for (const EventInfo& e : trace.events()) {
    if (!e.is_guard) names.push_back(e.full_name());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

namespace {

Status unknown_event(const Trace& trace, const std::string& name) {
  std::vector<std::string> known = known_event_names(trace);
  return Status::NotFound(
      fmt::format("no event '{}' in this trace (known events: {})", name,
                  known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
}

int field_index(const EventInfo& e, const std::string& field) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == field) return static_cast<int>(i);
  }
  return -1;
}

Status missing_field(const EventInfo& e, const std::string& field) {
  std::vector<std::string> names;
  for (const FieldInfo& f : e.fields) names.push_back(f.name);
  return Status::NotFound(
      fmt::format("event {} has no field '{}' (its fields: {})", e.full_name(), field,
                  names.empty() ? "none" : fmt::to_string(fmt::join(names, ", "))));
}

}  // namespace

Result<ResolvedPair> resolve_pair(const Trace& trace, const PairRule& rule) {
  ResolvedPair out;
  out.rule = rule;
  size_t n = trace.events().size() + 1;
  out.key_field.assign(n, -1);
  out.role.assign(n, 0);
  for (int pass = 0; pass < 2; ++pass) {
    const std::string& name = pass == 0 ? rule.begin : rule.end;
    std::vector<uint16_t>& ids = pass == 0 ? out.begin_ids : out.end_ids;
    for (const EventInfo& e : trace.events()) {
      if (e.is_guard || e.full_name() != name) continue;
      int k = field_index(e, rule.key);
      if (k < 0) return missing_field(e, rule.key);
      ids.push_back(e.id);
      if (e.id < n) {
        out.key_field[e.id] = k;
        out.role[e.id] = static_cast<uint8_t>(pass + 1);
      }
    }
    if (ids.empty()) return unknown_event(trace, name);
  }
  if (rule.begin == rule.end) {
    return Status::Invalid(
        fmt::format("pair rule {}: begin and end are the same event", rule.label()));
  }
  return out;
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
      writer = exporter::make_perfetto_writer(options, std::move(slices));
      break;
    case ExportFormat::kCsv:
      writer = exporter::make_csv_writer(options);
      break;
    case ExportFormat::kJsonl:
      writer = exporter::make_jsonl_writer(options);
      break;
  }
  auto source = trace.read_all();
  Record record;
  if (!source->next(&record)) {
    return Status::NotFound(fmt::format("the trace of process {} ({}) holds no records",
                                        trace.process().pid, trace.process().path));
  }
  Status st = writer->begin(trace, *source);
  if (!st.ok()) return st;
  ExportSummary summary;
  do {
    writer->write(record);
    ++summary.records;
  } while (source->next(&record));
  st = writer->finish(*source, &summary);
  if (!st.ok()) return st;
  for (const ThreadStats& t : source->threads()) {
    summary.lost += t.lost();
    summary.corrupt_blocks += t.corrupt_blocks;
  }
  summary.threads = static_cast<uint32_t>(source->threads().size());
  return summary;
}

}  // namespace nanotrace
