// The column reader's tables (ColumnReader::Impl, column_reader_impl.hpp): one per selected
// event layout, each with the plan by which the merge (columns.cc) decodes a record of that
// layout into its columns, and the string dictionaries the tables share; and the batch laid out
// and emptied before each read.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "nanotrace/columns.hpp"
#include "reader/column_reader_impl.hpp"

namespace nanotrace {
namespace {

bool selected(const std::vector<std::string>& filters, const EventInfo& e) {
  if (filters.empty()) return true;
  for (const std::string& f : filters) {
    if (e.named_by(f)) return true;
  }
  return false;
}

}  // namespace

Status ColumnReader::check_events(const Trace& trace, const ColumnOptions& options) {
  for (const std::string& f : options.events) {
    bool known = false;
    for (const EventInfo& e : trace.events()) {
      known = known || (!e.is_guard && e.named_by(f));
    }
    if (!known) return Status::NotFound(fmt::format("no event or group '{}' in this trace", f));
  }
  return Status::Ok();
}

// Tables for the selected events: one per (full name, field names and types).
void ColumnReader::Impl::make_tables() {
  const std::vector<EventInfo>& events = trace.events();
  uint32_t max_id = 0;
  for (const EventInfo& e : events) max_id = e.id > max_id ? e.id : max_id;
  table_of.assign(max_id + 1, -1);
  using Layout = std::tuple<std::string, std::vector<std::string>, std::vector<uint8_t>>;
  std::map<Layout, int> index;
  for (const EventInfo& e : events) {
    if (e.is_guard || e.id == 0 || trace.event_by_id(e.id) != &e) continue;
    if (!selected(options.events, e)) continue;
    std::vector<std::string> names;
    std::vector<uint8_t> types;
    for (const FieldInfo& f : e.fields) {
      names.push_back(f.name);
      types.push_back(static_cast<uint8_t>(f.type));
    }
    Layout layout(e.full_name(), std::move(names), std::move(types));
    auto [it, inserted] = index.try_emplace(std::move(layout), static_cast<int>(tables.size()));
    if (inserted) tables.push_back(make_table(e));
    tables[static_cast<size_t>(it->second)].name_code = event_names->code_of(e.full_name());
    tables[static_cast<size_t>(it->second)].ids.push_back(e.id);
    table_of[e.id] = it->second;
  }
}

// How take() decodes a record of e's layout: the fields up to the last one read or
// walked (a string: its length moves what follows), then scalars stepped over at once.
ColumnReader::Impl::Table ColumnReader::Impl::make_table(const EventInfo& e) {
  Table t{e.full_name(), 0, {}, &e, {}, {}, 0, {}, 0};
  Run run;
  size_t walked_runs = 0;  // runs up to the last field read or walked
  for (size_t i = 0; i < e.fields.size(); ++i) {
    const FieldInfo& f = e.fields[i];
    const bool read = wanted(f.name);
    const int column = read ? t.columns++ : -1;
    if (f.type != abi::FieldType::kString) {
      if (read) {
        t.stores.push_back({static_cast<uint16_t>(column), run.scalar_bytes});
        ++run.stores;
        walked_runs = t.runs.size() + 1;
      }
      run.scalar_bytes = static_cast<uint16_t>(run.scalar_bytes + 8);
      if (read) t.dictionary.push_back(-1);
      continue;
    }
    if (read) t.dictionary.push_back(dictionary_index(f.name));
    run.string = true;
    run.string_column = column;
    t.runs.push_back(run);
    walked_runs = t.runs.size();
    if (read) t.string_runs = t.runs.size();
    run = Run{};
    run.first_store = static_cast<uint16_t>(t.stores.size());
  }
  t.runs.push_back(run);
  t.runs.resize(walked_runs);
  return t;
}

// The dictionary of the string columns named `field`.
int ColumnReader::Impl::dictionary_index(const std::string& field) {
  auto [it, inserted] = dictionary_of.try_emplace(field, static_cast<int>(dictionaries.size()));
  if (inserted) {
    dictionaries.push_back(std::make_shared<StringDictionary>());
    recent.emplace_back();
  }
  return it->second;
}

bool ColumnReader::Impl::wanted(const std::string& field) const {
  if (options.fields.empty()) return true;
  for (const std::string& f : options.fields) {
    if (f == field) return true;
  }
  return false;
}

// Empties batch's columns, keeping their memory; lays its tables out on first use.
void ColumnReader::Impl::reset(ColumnSet* batch) {
  if (batch->tables.size() != tables.size()) {
    batch->tables.clear();
    for (const Table& t : tables) {
      EventTable out;
      out.name = t.name;
      out.name_code = t.name_code;
      out.ids = t.ids;
      for (const FieldInfo& f : t.layout->fields) {
        if (!wanted(f.name)) continue;
        FieldColumn c;
        c.info = f;
        out.fields.push_back(std::move(c));
      }
      batch->tables.push_back(std::move(out));
    }
  }
  // A dictionary past its bound starts again, as a new one: the batches before keep theirs.
  const size_t bound = options.max_dictionary_entries;
  for (size_t d = 0; d < dictionaries.size(); ++d) {
    if (bound == 0 || dictionaries[d]->size() <= bound) continue;
    dictionaries[d] = std::make_shared<StringDictionary>();
    recent[d] = RecentCodes{};
  }
  batch->event_names = event_names;
  for (EventTable& t : batch->tables) {
    t.time_ns.clear();
    t.seq.clear();
    t.thread.clear();
    t.event.clear();
    t.order.clear();
  }
  for (size_t k = 0; k < tables.size(); ++k) {
    std::vector<FieldColumn>& fields = batch->tables[k].fields;
    for (size_t j = 0; j < fields.size(); ++j) {
      fields[j].bits.clear();
      fields[j].codes.clear();
      const int d = tables[k].dictionary[j];
      if (d >= 0) fields[j].dictionary = dictionaries[static_cast<size_t>(d)];
    }
  }
  batch->gaps.clear();
  batch->rows = 0;
}

}  // namespace nanotrace
