// JsonLineEncoder (see json_lines.hpp).
#include "export/json_lines.hpp"

#include "export/output.hpp"

namespace nanotrace::exporter {

void JsonLineEncoder::prepare(const Trace& trace, const std::vector<ThreadStats>& threads) {
  threads_.clear();
  // A trace of several processes (`nanotrace run`) names each record's process as well.
  const bool processes = trace.processes().size() > 1;
  // A merge of several nodes (`nanotrace merge`) names each record's node.
  const bool nodes = trace.nodes().size() > 1;
  for (const ThreadStats& t : threads) {
    fmt::memory_buffer b;
    if (nodes && !t.info.kernel && t.info.process < trace.processes().size()) {
      append(b, ",\"node\":");
      json_string(b, trace.nodes()[trace.processes()[t.info.process].node].hostname);
    }
    if (processes) fmt::format_to(std::back_inserter(b), ",\"pid\":{}", t.info.pid);
    fmt::format_to(std::back_inserter(b), ",\"tid\":{},\"thread\":", t.info.tid);
    json_string(b, t.info.name);
    threads_.emplace_back(b.data(), b.size());
  }
  const std::vector<EventInfo>& events = trace.events();
  events_.assign(events.size() + 1, {});
  keys_.assign(events.size() + 1, {});
  for (const EventInfo& e : events) {
    if (e.id == 0 || e.id > events.size()) continue;
    fmt::memory_buffer b;
    append(b, ",\"event\":");
    json_string(b, e.full_name());
    append(b, ",\"fields\":{");
    events_[e.id].assign(b.data(), b.size());
    for (size_t f = 0; f < e.fields.size(); ++f) {
      fmt::memory_buffer k;
      if (f > 0) k.push_back(',');
      json_string(k, e.fields[f].name);
      k.push_back(':');
      keys_[e.id].emplace_back(k.data(), k.size());
    }
  }
}

// A kernel record: the user records' keys, plus its CPU and "kernel":true; tid is the thread
// the event ran in.
static void encode_kernel(fmt::memory_buffer& b, const Record& r) {
  fmt::format_to(std::back_inserter(b), "{{\"time_ns\":{},\"tid\":{},\"cpu\":{},\"seq\":{},",
                 r.time_ns, r.task, r.cpu, r.seq);
  append(b, "\"kernel\":true,\"event\":");
  json_string(b, r.event->full_name());
  append(b, ",\"fields\":{");
  for (uint32_t i = 0; i < r.field_count && i < r.event->fields.size(); ++i) {
    if (i > 0) b.push_back(',');
    json_string(b, r.event->fields[i].name);
    b.push_back(':');
    json_value(b, r.values[i]);
  }
  append(b, "}}\n");
}

void JsonLineEncoder::encode(fmt::memory_buffer& b, const Record& r) const {
  if (r.event->is_kernel) return encode_kernel(b, r);
  auto put_uint = [&b](uint64_t v) {
    fmt::format_int n(v);
    b.append(n.data(), n.data() + n.size());
  };
  append(b, "{\"time_ns\":");
  put_uint(r.time_ns);
  append(b, threads_[r.thread]);
  append(b, ",\"seq\":");
  put_uint(r.seq);
  uint16_t id = r.event->id;
  append(b, events_[id]);
  for (uint32_t i = 0; i < r.field_count && i < keys_[id].size(); ++i) {
    append(b, keys_[id][i]);
    json_value(b, display_value(r, i));
  }
  append(b, "}}\n");
}

}  // namespace nanotrace::exporter
