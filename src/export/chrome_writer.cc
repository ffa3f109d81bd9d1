// Chrome Trace Event JSON export (chrome://tracing, Perfetto UI, speedscope).
//
// {"displayTimeUnit":"ns","traceEvents":[...],"otherData":{...}} with:
// - "M" events naming each process and each thread (a trace of several processes, from
//   `nanotrace run`, puts every thread and its records under its own process's pid);
// - for each --slice rule, begin records as async "b" and end records as async "e" events
//   with the same name (the begin event's), category (its group) and "id" (the key field's
//   value), so overlapping requests each get their own slice;
// - every other record as a thread-scoped instant ("i", "s":"t");
// - fields as "args"; ts in microseconds with three decimals (ns precision);
// - per-thread loss counts in otherData.lost (tid -> records lost).
// Records are the bulk of the output (~150 bytes each, millions of them), so each is encoded
// straight into the output buffer with json_text.hpp: the constant text of an event (its
// prefix up to "pid", its "args" keys) and of a thread ("PID,\"tid\":TID,\"ts\":") is prepared
// once, and
// a record is those pieces plus its numbers and strings. Headers and trailers use fmt.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "export/json_sink.hpp"
#include "export/json_text.hpp"
#include "export/node_groups.hpp"
#include "export/output.hpp"
#include "export/writers.hpp"

namespace nanotrace::exporter {
namespace {

// Most bytes a field value of this type takes in the output.
size_t max_value_bytes(abi::FieldType type) {
  switch (type) {
    case abi::FieldType::kF32:
    case abi::FieldType::kF64:
      return json::kMaxDouble;
    case abi::FieldType::kBool:
      return 5;
    case abi::FieldType::kString:
      return json::max_string(abi::kMaxStringBytes);  // the reader never yields longer text
    case abi::FieldType::kPointer:
      return json::kMaxPointer;
    default:
      return 20;  // a 64-bit integer
  }
}

// The reader never yields longer text; the clamp keeps a reader bug from overrunning the
// record's reserved room (max_value_bytes).
inline std::string_view clamp(std::string_view text) {
  return text.substr(0, abi::kMaxStringBytes);
}

// A field value as json_value() of output.hpp writes it.
inline char* put_value(char* p, const FieldValue& v) {
  using abi::FieldType;
  switch (v.type) {
    case FieldType::kI8:
    case FieldType::kI16:
    case FieldType::kI32:
    case FieldType::kI64:
      return json::put_i64(p, static_cast<int64_t>(v.bits));
    case FieldType::kF32:
    case FieldType::kF64: {
      double d;  // the reader widens f32 values to double bits
      std::memcpy(&d, &v.bits, sizeof d);
      return json::put_double(p, d);
    }
    case FieldType::kBool:
      return json::put_bool(p, v.bits != 0);
    case FieldType::kString:
      return json::put_string(p, clamp(v.text));
    case FieldType::kPointer:
      return json::put_pointer(p, v.bits);
    default:
      return json::put_u64(p, v.bits);
  }
}

class ChromeWriter : public RecordWriter {
 public:
  ChromeWriter(const ExportOptions& options, std::vector<ResolvedPair> slices)
      : options_(options), slices_(std::move(slices)) {}

  Status begin(const Trace& trace, RecordSource& source) override {
    labels_ = process_labels(trace);
    size_t max_record = plan_events(trace.events());
    size_t max_tid = plan_threads(source);
    arena_.seal();
    for (Plan& plan : plans_) {
      plan.prefix = arena_.piece(plan.prefix_handle);
      plan.args = arena_.piece(plan.args_handle);
    }
    for (uint32_t h : key_handles_) keys_.push_back(arena_.piece(h));
    for (uint32_t h : tid_handles_) tids_.push_back(arena_.piece(h));

    Status st = sink_.open(options_.output, max_record + max_tid);
    if (!st.ok()) return st;
    fmt::memory_buffer b;
    auto it = std::back_inserter(b);
    append(b, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    const char* separator = "";
    for (size_t i = 0; i < trace.processes().size(); ++i) {
      const uint32_t pid = labels_.pids[i];
      fmt::format_to(it,
                     "{}{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{"
                     "\"name\":",
                     separator, pid, pid);
      json_string(b, labels_.names[i]);
      append(b, "}}");
      separator = ",\n";
    }
    bool kernel = false;
    for (const ThreadStats& t : source.threads()) kernel = kernel || t.info.kernel;
    if (kernel) {
      fmt::format_to(it,
                     "{}{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{"
                     "\"name\":\"kernel (ftrace)\"}}}}",
                     separator, kKernelPid);
    }
    for (const ThreadStats& t : source.threads()) {
      if (t.info.kernel) {
        fmt::format_to(it,
                       ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},"
                       "\"args\":{{\"name\":\"CPU {}\"}}}}",
                       kKernelPid, t.info.slot, t.info.slot);
        continue;
      }
      fmt::format_to(it,
                     ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{"
                     "\"name\":",
                     labels_.pid_of(t.info), t.info.tid);
      json_string(b, t.info.name.empty() ? fmt::format("thread {}", t.info.tid) : t.info.name);
      append(b, "}}");
    }
    sink_.append(std::string_view(b.data(), b.size()));
    return Status::Ok();
  }

  void write(const Record& r) override {
    if (r.event->is_kernel) return write_kernel(r);
    const Plan& plan = plans_[r.event->id];
    char* p = sink_.cursor();
    p = json::put(p, plan.prefix);
    p = json::put(p, tids_[r.thread]);
    p = json::put_micros(p, r.time_ns);
    if (plan.key >= 0) {
      std::memcpy(p, ",\"id\":", 6);
      p = put_id(p + 6, r.values[plan.key]);
    }
    p = json::put(p, plan.args);
    const json::Piece* keys = keys_.data() + plan.keys;
    uint32_t n = std::min(r.field_count, plan.fields);
    for (uint32_t i = 0; i < n; ++i) {
      if (i > 0) p = json::put(p, keys[i - 1]);
      p = put_value(p, display_value(r, i));
    }
    std::memcpy(p, "}}", 2);
    sink_.commit(p + 2);
  }

  Status finish(RecordSource& source, ExportSummary* summary) override {
    fmt::memory_buffer b;
    auto it = std::back_inserter(b);
    append(b, "\n],\"otherData\":{\"tracer\":\"nanotrace\",\"lost\":{");
    // A process image that exec replaced and the image after it share the main thread's tid:
    // one key per tid, with their losses added (in the order of first appearance).
    std::vector<std::pair<uint32_t, uint64_t>> lost;
    std::unordered_map<uint32_t, size_t> index_of_tid;
    std::vector<std::pair<uint32_t, uint64_t>> kernel_lost;  // by CPU
    for (const ThreadStats& t : source.threads()) {
      if (t.info.kernel) {
        kernel_lost.emplace_back(t.info.slot, t.lost());
        continue;
      }
      auto [at, added] = index_of_tid.emplace(t.info.tid, lost.size());
      if (added) lost.emplace_back(t.info.tid, 0);
      lost[at->second].second += t.lost();
    }
    bool first = true;
    for (const auto& [tid, count] : lost) {
      fmt::format_to(it, "{}\"{}\":{}", first ? "" : ",", tid, count);
      first = false;
    }
    for (const auto& [cpu, count] : kernel_lost) {
      fmt::format_to(it, "{}\"cpu{}\":{}", first ? "" : ",", cpu, count);
      first = false;
    }
    append(b, "}}}\n");
    sink_.append(std::string_view(b.data(), b.size()));
    summary->bytes_written = sink_.bytes();
    summary->buffer_bytes = sink_.buffer_bytes();
    return sink_.close();
  }

 private:
  // The constant text of one event's records.
  struct Plan {
    uint32_t prefix_handle = 0, args_handle = 0;
    json::Piece prefix;  // ",\n{\"name\":...,\"pid\":"
    json::Piece args;    // ",\"args\":{" and the first field's key
    uint32_t keys = 0;   // index in keys_ of the second field's ",\"NAME\":"
    uint32_t fields = 0;
    int key = -1;  // with a --slice rule: the field whose value is the slice id
  };

  // A kernel record (a file recorded with --kernel): an instant on its CPU's track of the
  // kernel's pseudo-process, the thread it ran in and its fields as args. Rare next to user
  // records, so formatted as it comes.
  void write_kernel(const Record& r) {
    kernel_line_.clear();
    append(kernel_line_, ",\n{\"name\":");
    json_string(kernel_line_, r.event->full_name());
    append(kernel_line_, ",\"cat\":");
    json_string(kernel_line_, r.event->group);
    fmt::format_to(std::back_inserter(kernel_line_),
                   ",\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":{},\"ts\":", kKernelPid, r.cpu);
    micros(kernel_line_, r.time_ns);
    fmt::format_to(std::back_inserter(kernel_line_), ",\"args\":{{\"tid\":{}", r.task);
    for (uint32_t i = 0; i < r.field_count && i < r.event->fields.size(); ++i) {
      kernel_line_.push_back(',');
      json_string(kernel_line_, r.event->fields[i].name);
      kernel_line_.push_back(':');
      json_value(kernel_line_, display_value(r, i));
    }
    append(kernel_line_, "}}");
    sink_.append(std::string_view(kernel_line_.data(), kernel_line_.size()));
  }

  // Builds the plans; returns the most bytes a record takes, apart from its pid and tid.
  size_t plan_events(const std::vector<EventInfo>& events) {
    size_t ids = 1;
    for (const EventInfo& e : events) ids = std::max<size_t>(ids, e.id + size_t{1});
    plans_.assign(ids, {});  // handle 0, the empty piece, for ids no event has
    arena_.add("");
    std::vector<uint8_t> role(ids, 0);
    std::vector<std::string> slice_name(ids);
    for (const ResolvedPair& pair : slices_) {
      for (size_t id = 0; id < pair.role.size() && id < ids; ++id) {
        if (pair.role[id] != 0 && role[id] == 0) {
          role[id] = pair.role[id];
          plans_[id].key = pair.key_field[id];
          slice_name[id] = pair.rule.begin;
        }
      }
    }
    size_t max_record = 0;
    for (const EventInfo& e : events) {
      if (e.id == 0) continue;
      Plan& plan = plans_[e.id];
      fmt::memory_buffer b;
      append(b, ",\n{\"name\":");
      json_string(b, role[e.id] ? slice_name[e.id] : e.full_name());
      append(b, ",\"cat\":");
      size_t colon = role[e.id] ? slice_name[e.id].find(':') : std::string::npos;
      json_string(b, colon != std::string::npos ? slice_name[e.id].substr(0, colon) : e.group);
      append(b, role[e.id] == 1   ? ",\"ph\":\"b\""
                : role[e.id] == 2 ? ",\"ph\":\"e\""
                                  : ",\"ph\":\"i\",\"s\":\"t\"");
      append(b, ",\"pid\":");
      plan.prefix_handle = arena_.add(std::string_view(b.data(), b.size()));
      // ts, "}}" and, for a slice, ",\"id\":" and the key's value (a string or a number).
      size_t bytes = b.size() + 24 + 2;
      if (plan.key >= 0) bytes += 6 + json::max_string(abi::kMaxStringBytes);

      b.clear();
      append(b, ",\"args\":{");
      plan.keys = static_cast<uint32_t>(key_handles_.size());
      plan.fields = static_cast<uint32_t>(e.fields.size());
      for (size_t f = 0; f < e.fields.size(); ++f) {
        if (f > 0) b.push_back(',');
        json_string(b, e.fields[f].name);
        b.push_back(':');
        if (f == 0) {
          plan.args_handle = arena_.add(std::string_view(b.data(), b.size()));
        } else {
          key_handles_.push_back(arena_.add(std::string_view(b.data(), b.size())));
        }
        // An enum value may print as its name: a string (clamped like any other).
        bytes +=
            b.size() + (e.fields[f].value_names.empty() ? max_value_bytes(e.fields[f].type)
                                                        : max_value_bytes(abi::FieldType::kString));
        b.clear();
      }
      if (e.fields.empty()) {
        plan.args_handle = arena_.add(std::string_view(b.data(), b.size()));
        bytes += b.size();
      }
      max_record = std::max(max_record, bytes);
    }
    return max_record;
  }

  // Prepares "PID,\"tid\":TID,\"ts\":" per thread (its own process's pid); returns the longest.
  size_t plan_threads(RecordSource& source) {
    size_t longest = 0;
    for (const ThreadStats& t : source.threads()) {
      std::string text = fmt::format("{},\"tid\":{},\"ts\":", labels_.pid_of(t.info), t.info.tid);
      longest = std::max(longest, text.size());
      tid_handles_.push_back(arena_.add(text));
    }
    return longest;
  }

  // The slice id: the key's value as a JSON string.
  static char* put_id(char* p, const FieldValue& k) {
    if (k.type == abi::FieldType::kString) return json::put_string(p, clamp(k.text));
    *p = '"';
    p = json::put_u64(p + 1, k.bits);
    *p = '"';
    return p + 1;
  }

  // The kernel's pseudo-process: no process has this pid (pid_max is at most 2^22).
  static constexpr uint32_t kKernelPid = 0x7fffffff;

  ExportOptions options_;
  std::vector<ResolvedPair> slices_;
  ProcessLabels labels_;  // a merged trace's nodes: pids and names to show
  fmt::memory_buffer kernel_line_;
  TextSink sink_;
  json::PieceArena arena_;
  std::vector<Plan> plans_;  // by event id
  std::vector<uint32_t> key_handles_, tid_handles_;
  std::vector<json::Piece> keys_;
  std::vector<json::Piece> tids_;  // by thread index
};

}  // namespace

std::unique_ptr<RecordWriter> make_chrome_writer(const ExportOptions& options,
                                                 std::vector<ResolvedPair> slices) {
  return std::make_unique<ChromeWriter>(options, std::move(slices));
}

}  // namespace nanotrace::exporter
