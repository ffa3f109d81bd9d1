// read_columns: the thread streams' raw record spans merged by time exactly as MergedSource
// merges decoded records (smallest clock value first, ties by thread index), each record
// decoded straight into its table's columns. No Record is filled: a row costs a few appends.
//
// The merge keeps taking records from one thread for as long as they come before every other
// thread's next record, so it compares clock values once per record and rescans the threads
// only where their records interleave.
#include "nanotrace/columns.hpp"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "reader/record_walk.hpp"

namespace nanotrace {
namespace {

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

bool selected(const std::vector<std::string>& filters, const EventInfo& e) {
  if (filters.empty()) return true;
  for (const std::string& f : filters) {
    if (f == e.group || f == e.full_name()) return true;
  }
  return false;
}

// One thread stream's position: the record at span.data + offset, with its clock value.
struct Cursor {
  std::unique_ptr<SpanSource> source;
  RecordSpan span{};
  uint32_t offset = 0;
  uint64_t seq = 0;
  uint64_t ticks = 0;

  // Moves onto the next record if the span is used up; false at the stream's end.
  bool load() {
    while (offset >= span.bytes) {
      if (!source->next(&span)) return false;
      offset = 0;
      seq = span.first_seq;
    }
    ticks = abi::expand_ticks(span.base_ticks, load_u64(span.data + offset) >> 16);
    return true;
  }
};

class ColumnReader {
 public:
  ColumnReader(Trace& trace, ColumnSet* out) : trace_(trace), sizer_(trace), out_(out) {}

  // Tables for the selected events: one per (full name, field names and types).
  void make_tables(const ColumnOptions& options) {
    row_order_ = options.row_order;
    const std::vector<EventInfo>& events = trace_.events();
    uint32_t max_id = 0;
    for (const EventInfo& e : events) max_id = e.id > max_id ? e.id : max_id;
    table_of_.assign(max_id + 1, -1);
    using Layout = std::tuple<std::string, std::vector<std::string>, std::vector<uint8_t>>;
    std::map<Layout, int> index;
    for (const EventInfo& e : events) {
      if (e.is_guard || e.id == 0 || trace_.event_by_id(e.id) != &e) continue;
      if (!selected(options.events, e)) continue;
      std::vector<std::string> names;
      std::vector<uint8_t> types;
      for (const FieldInfo& f : e.fields) {
        names.push_back(f.name);
        types.push_back(static_cast<uint8_t>(f.type));
      }
      Layout layout(e.full_name(), std::move(names), std::move(types));
      auto [it, inserted] =
          index.try_emplace(std::move(layout), static_cast<int>(out_->tables.size()));
      if (inserted) {
        EventTable t;
        t.name = e.full_name();
        for (const FieldInfo& f : e.fields) {
          FieldColumn c;
          c.info = f;
          if (c.is_string()) c.offsets.push_back(0);
          t.fields.push_back(std::move(c));
        }
        out_->tables.push_back(std::move(t));
      }
      out_->tables[it->second].ids.push_back(e.id);
      table_of_[e.id] = it->second;
    }
  }

  void read() {
    std::vector<std::unique_ptr<SpanSource>> sources = trace_.read_spans();
    cursors_.resize(sources.size());
    std::vector<uint32_t> live;
    for (uint32_t i = 0; i < sources.size(); ++i) {
      cursors_[i].source = std::move(sources[i]);
      if (cursors_[i].load()) live.push_back(i);
    }
    while (!live.empty()) {
      // The thread whose next record comes first, and the one after it.
      size_t best = 0;
      for (size_t j = 1; j < live.size(); ++j) {
        if (cursors_[live[j]].ticks < cursors_[live[best]].ticks) best = j;  // ties: lower index
      }
      const uint32_t b = live[best];
      uint64_t bound_ticks = ~uint64_t{0};
      uint32_t bound = ~uint32_t{0};
      for (uint32_t i : live) {
        if (i == b) continue;
        const uint64_t t = cursors_[i].ticks;
        if (t < bound_ticks || (t == bound_ticks && i < bound)) {
          bound_ticks = t;
          bound = i;
        }
      }
      Cursor& c = cursors_[b];
      for (;;) {
        take(c, b);
        if (!c.load()) {
          live.erase(live.begin() + static_cast<ptrdiff_t>(best));
          break;
        }
        if (c.ticks > bound_ticks || (c.ticks == bound_ticks && b > bound)) break;
      }
    }
    const ProcessInfo& p = trace_.process();
    out_->lost = p.lost_no_slot + p.lost_reclaimed;
    for (Cursor& cur : cursors_) {
      const ThreadStats& s = cur.source->stats();
      out_->threads.push_back(s);
      out_->thread_pid.push_back(p.pid);
      out_->lost += s.lost();
      out_->corrupt_blocks += s.corrupt_blocks;
    }
  }

 private:
  // Decodes (or, for an event not selected, steps over) the record under the cursor. The
  // walk that made the span checked every record in it (ids, string lengths, sizes).
  void take(Cursor& c, uint32_t thread) {
    const uint8_t* rec = c.span.data + c.offset;
    const uint16_t id = static_cast<uint16_t>(load_u64(rec) & 0xffff);
    const int k = id < table_of_.size() ? table_of_[id] : -1;
    if (k < 0) {
      uint32_t size = sizer_.size(c.span.data, c.offset, c.span.bytes);
      c.offset = size != 0 ? c.offset + size : c.span.bytes;  // 0 cannot happen: checked
    } else {
      EventTable& t = out_->tables[static_cast<size_t>(k)];
      t.time_ns.push_back(trace_.ticks_to_ns(c.ticks));
      t.seq.push_back(c.seq);
      t.thread.push_back(thread);
      if (t.ids.size() > 1) t.event.push_back(id);
      if (row_order_) t.order.push_back(out_->rows);
      ++out_->rows;
      const uint8_t* p = rec + 8;
      for (FieldColumn& f : t.fields) {
        if (f.info.type == abi::FieldType::kString) {
          uint32_t n = p[0];
          f.text.append(reinterpret_cast<const char*>(p + 1), n);
          f.offsets.push_back(f.text.size());
          p += abi::string_slot_bytes(n);
        } else {
          f.bits.push_back(load_u64(p));
          p += 8;
        }
      }
      c.offset += static_cast<uint32_t>(p - rec);
    }
    ++c.seq;
  }

  Trace& trace_;
  reader::RecordSizer sizer_;
  ColumnSet* out_;
  std::vector<int> table_of_;  // by event id: index into out_->tables, -1 if not read
  bool row_order_ = false;
  std::vector<Cursor> cursors_;
};

}  // namespace

FieldValue FieldColumn::value_at(size_t row) const {
  FieldValue v;
  v.type = info.type;
  if (is_string()) {
    v.text = string_at(row);
    v.bits = v.text.size();
  } else {
    v.bits = bits[row];
  }
  return v;
}

const EventTable* ColumnSet::find(std::string_view name) const {
  for (const EventTable& t : tables) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Result<ColumnSet> read_columns(Trace& trace, const ColumnOptions& options) {
  for (const std::string& f : options.events) {
    bool known = false;
    for (const EventInfo& e : trace.events()) {
      known = known || (!e.is_guard && (f == e.group || f == e.full_name()));
    }
    if (!known) return Status::NotFound(fmt::format("no event or group '{}' in this trace", f));
  }
  ColumnSet out;
  ColumnReader reader(trace, &out);
  reader.make_tables(options);
  reader.read();
  return out;
}

}  // namespace nanotrace
