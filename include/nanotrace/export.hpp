// Exporting nanotrace data to other tools' formats: CTF 1.8 (babeltrace2, Trace Compass),
// Chrome Trace Event JSON (chrome://tracing, Perfetto UI), Perfetto protobuf TrackEvent
// packets (kernel events as Perfetto's ftrace packets), CSV and JSON lines.
//
// Every exporter streams: it reads the trace once, merged by time, and re-encodes each record
// as it comes, so memory is bounded by the reader's per-thread block buffers plus one output
// buffer (CTF: one packet buffer per thread), whatever the size of the trace. Per-thread loss
// counts (ThreadStats::lost()) are carried into the output where the format can say so (CTF:
// events_discarded; Chrome JSON: otherData; Perfetto: a "nanotrace:lost" instant, and
// ftrace's per CPU in FtraceStats too).
//
// Thread safety: the functions take a Trace, which belongs to one thread at a time; calls on
// different Traces may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/analysis.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

enum class ExportFormat { kCtf, kChrome, kPerfetto, kCsv, kJsonl };

// parse_export_format - the format named "ctf", "chrome", "perfetto", "csv" or "jsonl".
// Returns: the format.
// Errors: kInvalidArgument for any other name (the message lists the valid ones).
Result<ExportFormat> parse_export_format(std::string_view name);
const char* export_format_name(ExportFormat format);

struct ExportOptions {
  ExportFormat format = ExportFormat::kCtf;
  // CTF: a directory (created if missing; earlier metadata and stream files in it are
  // replaced). Other formats: a file, or "-" for standard output.
  std::string output;
  // Chrome and Perfetto: begin/end rules drawn as slices (async, keyed by the key field).
  std::vector<PairRule> slices;
  // CTF: packet size in bytes (0: chosen from the thread count, 64 KiB .. 1 MiB).
  uint32_t packet_bytes = 0;
};

struct ExportSummary {
  uint64_t records = 0;         // records written
  uint64_t lost = 0;            // records lost before they could be read, all threads
  uint64_t corrupt_blocks = 0;  // blocks skipped as damaged (their records are not counted)
  uint32_t threads = 0;         // threads (CTF: streams) in the output
  uint64_t bytes_written = 0;   // bytes of output (CTF: metadata and stream files)
  uint64_t buffer_bytes = 0;    // output buffers held at the peak (the memory bound)
};

// export_trace - reads every record of trace (merged by time) and writes it in
// options.format to options.output.
// Returns: what was written.
// Errors: kNotFound (trace has no records, or a slice rule names an unknown event or field),
// kInvalidArgument (bad options), kIoError (output cannot be created or written; the message
// names the path and the errno text).
Result<ExportSummary> export_trace(Trace& trace, const ExportOptions& options);

}  // namespace nanotrace
