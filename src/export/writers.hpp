// Internal interface of the exporters: export_trace() feeds each writer the records of one
// merged pass over the trace. One writer per format, in its own file.
#pragma once

#include <memory>

#include "nanotrace/export.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::exporter {

class RecordWriter {
 public:
  virtual ~RecordWriter() = default;
  // Creates the output. source: the record stream about to be read (its threads() list is
  // complete; its loss counts grow as records are read).
  virtual Status begin(const Trace& trace, RecordSource& source) = 0;
  // Encodes one record (errors are sticky and reported by finish()).
  virtual void write(const Record& record) = 0;
  // Writes what is buffered and closes the output; fills bytes_written and buffer_bytes.
  virtual Status finish(RecordSource& source, ExportSummary* summary) = 0;
};

// CTF is written per thread from raw record spans, not through a RecordWriter.
Result<ExportSummary> export_ctf(Trace& trace, const ExportOptions& options);
std::unique_ptr<RecordWriter> make_chrome_writer(const ExportOptions& options,
                                                 std::vector<ResolvedPair> slices);
std::unique_ptr<RecordWriter> make_perfetto_writer(const ExportOptions& options,
                                                   std::vector<ResolvedPair> slices);
// Perfetto without slice rules or kernel events (every record an instant): from the records'
// bytes (RawRecordMerge), not through a RecordWriter.
Result<ExportSummary> export_perfetto_instants(Trace& trace, const ExportOptions& options);
// export_trace()'s error for a trace without records, and its summary's loss counts.
Status no_records(const Trace& trace);
void count_losses(const std::vector<ThreadStats>& threads, ExportSummary* summary);
std::unique_ptr<RecordWriter> make_csv_writer(const ExportOptions& options);
std::unique_ptr<RecordWriter> make_jsonl_writer(const ExportOptions& options);

}  // namespace nanotrace::exporter
