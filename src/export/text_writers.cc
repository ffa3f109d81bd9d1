// CSV and JSON-lines export: one line per record, streamed through a 1 MiB buffer.
//
// JSON lines: the objects `nanotrace dump --json` prints (json_lines.hpp).
// CSV: a header "time_ns,tid,thread,seq,event,<every field name of the trace's events, in
// order of first appearance; "fields.NAME" if NAME is one of the first five>", then one row per
// record with the cells of fields the record's event does not have left empty (a wide table pandas
// or a spreadsheet reads directly). A trace of several processes (`nanotrace run`) has a "pid"
// column after time_ns, and a merge of several nodes (`nanotrace merge`) a "node" column (its
// hostname) before it. A kernel event's row (a file recorded with --kernel) has the thread
// it ran in as tid, "cpuN" as thread, and no pid.
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
    processes_ = trace.processes().size() > 1;
    nodes_ = trace.nodes().size() > 1;
    for (const ThreadStats& t : source.threads()) threads_.push_back(thread_cells(trace, t));
    write_header(lay_out_columns(trace));
    return Status::Ok();
  }

  void write(const Record& r) override {
    fmt::memory_buffer& b = out_.buf();
    put_uint(b, r.time_ns);
    uint32_t id = r.event->id;
    if (r.event->is_kernel) {
      // The thread it ran in (its process is not known: no pid), the CPU as thread name.
      id += kernel_base_;
      if (nodes_) b.push_back(',');
      if (processes_) b.push_back(',');
      fmt::format_to(std::back_inserter(b), ",{},cpu{}", r.task, r.cpu);
    } else {
      append(b, threads_[r.thread]);
    }
    b.push_back(',');
    put_uint(b, r.seq);
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
  static void csv_text(fmt::memory_buffer& b, std::string_view text) {
    FieldValue v;
    v.type = abi::FieldType::kString;
    v.text = text;
    csv_value(b, v);
  }

  // A thread's cells after the time: [,node][,pid],tid,name.
  std::string thread_cells(const Trace& trace, const ThreadStats& t) const {
    fmt::memory_buffer b;
    if (nodes_) {
      b.push_back(',');
      if (!t.info.kernel && t.info.process < trace.processes().size()) {
        csv_text(b, trace.nodes()[trace.processes()[t.info.process].node].hostname);
      }
    }
    if (processes_) fmt::format_to(std::back_inserter(b), ",{}", t.info.pid);
    fmt::format_to(std::back_inserter(b), ",{},", t.info.tid);
    csv_text(b, t.info.name);
    return std::string(b.data(), b.size());
  }

  // One column per field name of any event, in the order they first appear; each event's
  // name cell and where each of its fields goes. Returns the columns' names.
  std::vector<std::string> lay_out_columns(const Trace& trace) {
    std::vector<std::string> columns;
    // User events by id (1..N), then kernel events (N + 1 + their id).
    std::vector<const EventInfo*> events;
    for (const EventInfo& e : trace.events()) events.push_back(&e);
    kernel_base_ = static_cast<uint32_t>(trace.events().size()) + 1;
    for (const EventInfo& e : trace.kernel_events()) events.push_back(&e);
    for (const EventInfo* e : events) {
      for (const FieldInfo& f : e->fields) {
        if (std::find(columns.begin(), columns.end(), f.name) == columns.end()) {
          columns.push_back(f.name);
        }
      }
    }
    columns_ = columns.size();
    const size_t slots = kernel_base_ + trace.kernel_events().size();
    event_.assign(slots, {});
    field_of_column_.assign(slots, std::vector<int>(columns_, -1));
    for (const EventInfo* ep : events) {
      const EventInfo& e = *ep;
      const uint32_t id = e.is_kernel ? kernel_base_ + e.id : uint32_t{e.id};
      if ((!e.is_kernel && (e.id == 0 || e.id >= kernel_base_)) || id >= slots) continue;
      fmt::memory_buffer b;
      b.push_back(',');
      csv_text(b, e.full_name());
      event_[id].assign(b.data(), b.size());
      for (size_t f = 0; f < e.fields.size(); ++f) {
        size_t c = static_cast<size_t>(std::find(columns.begin(), columns.end(), e.fields[f].name) -
                                       columns.begin());
        if (field_of_column_[id][c] < 0) field_of_column_[id][c] = static_cast<int>(f);
      }
    }
    return columns;
  }

  // A field named as one of the fixed columns is written fields.NAME.
  void write_header(const std::vector<std::string>& columns) {
    fmt::memory_buffer& b = out_.buf();
    append(b, nodes_       ? "time_ns,node,pid,tid,thread,seq,event"
              : processes_ ? "time_ns,pid,tid,thread,seq,event"
                           : "time_ns,tid,thread,seq,event");
    for (const std::string& c : columns) {
      b.push_back(',');
      bool clash = c == "time_ns" || c == "tid" || c == "thread" || c == "seq" || c == "event" ||
                   (processes_ && c == "pid") || (nodes_ && c == "node");
      if (clash) append(b, "fields.");
      csv_text(b, c);
    }
    b.push_back('\n');
  }

  size_t columns_ = 0;
  uint32_t kernel_base_ = 1;  // the slot of kernel event 0 in event_ and field_of_column_
  bool processes_ = false;
  bool nodes_ = false;
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
