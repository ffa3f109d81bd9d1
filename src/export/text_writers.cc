// CSV and JSON-lines export: one line per record, streamed through a 1 MiB buffer.
//
// JSON lines: the objects `nanotrace dump --json` prints (json_lines.hpp).
// CSV: a header "time_ns,tid,thread,seq,event,<every field name of the trace's events, in
// order of first appearance; "fields.NAME" if NAME is one of the first five>", then one row per
// record with the cells of fields the record's event does not have left empty (a wide table pandas
// or a spreadsheet reads directly). A trace of several processes (`nanotrace run`) has a "pid"
// column after time_ns.
#include <fmt/format.h>

#include <algorithm>

#include "export/json_lines.hpp"
#include "export/output.hpp"
#include "export/writers.hpp"

namespace nanotrace::exporter {
namespace {

void put_uint(fmt::memory_buffer& b, uint64_t v) {
  fmt::format_int n(v);
  b.append(n.data(), n.data() + n.size());
}

// What both formats share: one line per record into a buffered file, with the text of each
// thread's and each event's constant cells prepared once.
class LineWriter : public RecordWriter {
 public:
  explicit LineWriter(const ExportOptions& options) : options_(options) {}

  Status finish(RecordSource&, ExportSummary* summary) override {
    summary->bytes_written = out_.bytes();
    summary->buffer_bytes = OutFile::kFlushBytes;
    return out_.close();
  }

 protected:
  ExportOptions options_;
  OutFile out_;
  std::vector<std::string> threads_;  // by thread index: the thread's cells
  std::vector<std::string> event_;    // by event id: the event's cells
};

class JsonlWriter : public LineWriter {
 public:
  using LineWriter::LineWriter;

  Status begin(const Trace& trace, RecordSource& source) override {
    Status st = out_.open(options_.output);
    if (!st.ok()) return st;
    encoder_.prepare(trace, source.threads());
    return Status::Ok();
  }

  void write(const Record& r) override {
    encoder_.encode(out_.buf(), r);
    out_.maybe_flush();
  }

 private:
  JsonLineEncoder encoder_;
};

class CsvWriter : public LineWriter {
 public:
  using LineWriter::LineWriter;

  Status begin(const Trace& trace, RecordSource& source) override {
    Status st = out_.open(options_.output);
    if (!st.ok()) return st;
    const bool processes = trace.processes().size() > 1;
    for (const ThreadStats& t : source.threads()) {
      fmt::memory_buffer b;
      if (processes) fmt::format_to(std::back_inserter(b), ",{}", t.info.pid);
      fmt::format_to(std::back_inserter(b), ",{},", t.info.tid);
      FieldValue name;
      name.type = abi::FieldType::kString;
      name.text = t.info.name;
      csv_value(b, name);
      threads_.emplace_back(b.data(), b.size());
    }
    std::vector<std::string> columns;
    const std::vector<EventInfo>& events = trace.events();
    for (const EventInfo& e : events) {
      for (const FieldInfo& f : e.fields) {
        if (std::find(columns.begin(), columns.end(), f.name) == columns.end()) {
          columns.push_back(f.name);
        }
      }
    }
    columns_ = columns.size();
    event_.assign(events.size() + 1, {});
    field_of_column_.assign(events.size() + 1, std::vector<int>(columns_, -1));
    for (const EventInfo& e : events) {
      if (e.id == 0 || e.id > events.size()) continue;
      FieldValue name;
      name.type = abi::FieldType::kString;
      std::string full = e.full_name();
      name.text = full;
      fmt::memory_buffer b;
      b.push_back(',');
      csv_value(b, name);
      event_[e.id].assign(b.data(), b.size());
      for (size_t f = 0; f < e.fields.size(); ++f) {
        size_t c = static_cast<size_t>(std::find(columns.begin(), columns.end(), e.fields[f].name) -
                                       columns.begin());
        if (field_of_column_[e.id][c] < 0) field_of_column_[e.id][c] = static_cast<int>(f);
      }
    }
    fmt::memory_buffer& b = out_.buf();
    append(b, processes ? "time_ns,pid,tid,thread,seq,event" : "time_ns,tid,thread,seq,event");
    for (const std::string& c : columns) {
      b.push_back(',');
      bool clash = c == "time_ns" || c == "tid" || c == "thread" || c == "seq" || c == "event" ||
                   (processes && c == "pid");
      if (clash) append(b, "fields.");
      FieldValue name;
      name.type = abi::FieldType::kString;
      name.text = c;
      csv_value(b, name);
    }
    b.push_back('\n');
    return Status::Ok();
  }

  void write(const Record& r) override {
    fmt::memory_buffer& b = out_.buf();
    put_uint(b, r.time_ns);
    append(b, threads_[r.thread]);
    b.push_back(',');
    put_uint(b, r.seq);
    uint16_t id = r.event->id;
    append(b, event_[id]);
    const std::vector<int>& map = field_of_column_[id];
    for (size_t c = 0; c < columns_; ++c) {
      b.push_back(',');
      if (map[c] >= 0) csv_value(b, display_value(r, static_cast<uint32_t>(map[c])));
    }
    b.push_back('\n');
    out_.maybe_flush();
  }

 private:
  size_t columns_ = 0;
  std::vector<std::vector<int>> field_of_column_;
};

}  // namespace

std::unique_ptr<RecordWriter> make_jsonl_writer(const ExportOptions& options) {
  return std::make_unique<JsonlWriter>(options);
}
std::unique_ptr<RecordWriter> make_csv_writer(const ExportOptions& options) {
  return std::make_unique<CsvWriter>(options);
}

}  // namespace nanotrace::exporter
