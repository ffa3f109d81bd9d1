// Chrome Trace Event JSON export (chrome://tracing, Perfetto UI, speedscope).
//
// {"displayTimeUnit":"ns","traceEvents":[...],"otherData":{...}} with:
// - "M" events naming the process and each thread;
// - for each --slice rule, begin records as async "b" and end records as async "e" events
//   with the same name (the begin event's), category (its group) and "id" (the key field's
//   value), so overlapping requests each get their own slice;
// - every other record as a thread-scoped instant ("i", "s":"t");
// - fields as "args"; ts in microseconds with three decimals (ns precision);
// - per-thread loss counts in otherData.lost (tid -> records lost).
// Encoding is hand-rolled into one 1 MiB buffer (fmt::format_int, precomputed per-event
// prefixes), no JSON library per record.
#include <fmt/format.h>

#include "export/output.hpp"
#include "export/writers.hpp"

namespace nanotrace::exporter {
namespace {

class ChromeWriter : public RecordWriter {
 public:
  ChromeWriter(const ExportOptions& options, std::vector<ResolvedPair> slices)
      : options_(options), slices_(std::move(slices)) {}

  Status begin(const Trace& trace, RecordSource& source) override {
    Status st = out_.open(options_.output);
    if (!st.ok()) return st;
    const ProcessInfo& p = trace.process();
    pid_ = p.pid;
    const std::vector<EventInfo>& events = trace.events();
    prefix_.assign(events.size() + 1, {});
    field_keys_.assign(events.size() + 1, {});
    role_.assign(events.size() + 1, 0);
    key_.assign(events.size() + 1, -1);
    for (const ResolvedPair& pair : slices_) {
      for (size_t id = 0; id < pair.role.size(); ++id) {
        if (pair.role[id] != 0 && role_[id] == 0) {
          role_[id] = pair.role[id];
          key_[id] = pair.key_field[id];
          slice_name_.resize(events.size() + 1);
          slice_name_[id] = pair.rule.begin;
        }
      }
    }
    for (const EventInfo& e : events) {
      if (e.id == 0 || e.id > events.size()) continue;
      fmt::memory_buffer b;
      append(b, "{\"name\":");
      json_string(b, role_[e.id] ? slice_name_[e.id] : e.full_name());
      append(b, ",\"cat\":");
      size_t colon = role_[e.id] ? slice_name_[e.id].find(':') : std::string::npos;
      json_string(b, colon != std::string::npos ? slice_name_[e.id].substr(0, colon) : e.group);
      append(b, role_[e.id] == 1   ? ",\"ph\":\"b\""
                : role_[e.id] == 2 ? ",\"ph\":\"e\""
                                   : ",\"ph\":\"i\",\"s\":\"t\"");
      fmt::format_to(std::back_inserter(b), ",\"pid\":{},\"tid\":", pid_);
      prefix_[e.id].assign(b.data(), b.size());
      for (size_t f = 0; f < e.fields.size(); ++f) {
        fmt::memory_buffer k;
        if (f > 0) k.push_back(',');
        json_string(k, e.fields[f].name);
        k.push_back(':');
        field_keys_[e.id].emplace_back(k.data(), k.size());
      }
    }
    fmt::memory_buffer& b = out_.buf();
    auto it = std::back_inserter(b);
    append(b, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    fmt::format_to(
        it,
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", pid_,
        pid_);
    json_string(b, p.user_name.empty() ? p.process_name : p.user_name);
    append(b, "}}");
    for (const ThreadStats& t : source.threads()) {
      tids_.push_back(t.info.tid);
      fmt::format_to(it,
                     ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{"
                     "\"name\":",
                     pid_, t.info.tid);
      json_string(b, t.info.name.empty() ? fmt::format("thread {}", t.info.tid) : t.info.name);
      append(b, "}}");
    }
    return Status::Ok();
  }

  void write(const Record& r) override {
    fmt::memory_buffer& b = out_.buf();
    uint16_t id = r.event->id;
    append(b, ",\n");
    append(b, prefix_[id]);
    fmt::format_int tid(tids_[r.thread]);
    b.append(tid.data(), tid.data() + tid.size());
    append(b, ",\"ts\":");
    fmt::format_int us(r.time_ns / 1000);
    b.append(us.data(), us.data() + us.size());
    uint32_t frac = static_cast<uint32_t>(r.time_ns % 1000);
    const char dec[4] = {'.', static_cast<char>('0' + frac / 100),
                         static_cast<char>('0' + frac / 10 % 10),
                         static_cast<char>('0' + frac % 10)};
    b.append(dec, dec + 4);
    if (role_[id] != 0) {
      append(b, ",\"id\":");
      const FieldValue& k = r.values[key_[id]];
      if (k.type == abi::FieldType::kString) {
        json_string(b, k.text);
      } else {
        b.push_back('"');
        fmt::format_int n(k.bits);
        b.append(n.data(), n.data() + n.size());
        b.push_back('"');
      }
    }
    append(b, ",\"args\":{");
    const std::vector<std::string>& keys = field_keys_[id];
    for (uint32_t i = 0; i < r.field_count; ++i) {
      append(b, keys[i]);
      json_value(b, r.values[i]);
    }
    append(b, "}}");
    out_.maybe_flush();
  }

  Status finish(RecordSource& source, ExportSummary* summary) override {
    fmt::memory_buffer& b = out_.buf();
    auto it = std::back_inserter(b);
    append(b, "\n],\"otherData\":{\"tracer\":\"nanotrace\",\"lost\":{");
    bool first = true;
    for (const ThreadStats& t : source.threads()) {
      fmt::format_to(it, "{}\"{}\":{}", first ? "" : ",", t.info.tid, t.lost());
      first = false;
    }
    append(b, "}}}\n");
    summary->bytes_written = out_.bytes();
    summary->buffer_bytes = OutFile::kFlushBytes;
    return out_.close();
  }

 private:
  ExportOptions options_;
  std::vector<ResolvedPair> slices_;
  OutFile out_;
  uint32_t pid_ = 0;
  std::vector<uint32_t> tids_;
  std::vector<std::string> prefix_;
  std::vector<std::vector<std::string>> field_keys_;
  std::vector<uint8_t> role_;
  std::vector<int> key_;
  std::vector<std::string> slice_name_;
};

}  // namespace

std::unique_ptr<RecordWriter> make_chrome_writer(const ExportOptions& options,
                                                 std::vector<ResolvedPair> slices) {
  return std::make_unique<ChromeWriter>(options, std::move(slices));
}

}  // namespace nanotrace::exporter
