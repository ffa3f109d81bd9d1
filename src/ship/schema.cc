// The shipped tables' columns and their DDL.
#include "ship/schema.hpp"

#include <fmt/format.h>

namespace nanotrace::ship {

const TableDef& events_table() {
  static const TableDef t{"events",
                          {{"date", "Date"},
                           {"trace_id", "UInt64"},
                           {"node", "String"},
                           {"pid", "UInt32"},
                           {"process", "String"},
                           {"tid", "UInt32"},
                           {"thread", "String"},
                           {"event", "String"},
                           {"kernel", "UInt8"},
                           {"cpu", "UInt32"},
                           {"realtime_ns", "UInt64"},
                           {"ticks", "UInt64"},
                           {"seq", "UInt64"},
                           {"int_keys", "Array(String)"},
                           {"int_values", "Array(Int64)"},
                           {"uint_keys", "Array(String)"},
                           {"uint_values", "Array(UInt64)"},
                           {"float_keys", "Array(String)"},
                           {"float_values", "Array(Float64)"},
                           {"str_keys", "Array(String)"},
                           {"str_values", "Array(String)"}},
                          "node, event, realtime_ns"};
  return t;
}

const TableDef& intervals_table() {
  static const TableDef t{"intervals",
                          {{"date", "Date"},
                           {"trace_id", "UInt64"},
                           {"node", "String"},
                           {"pair", "String"},
                           {"begin_event", "String"},
                           {"end_event", "String"},
                           {"key", "String"},
                           {"pid", "UInt32"},
                           {"process", "String"},
                           {"tid", "UInt32"},
                           {"thread", "String"},
                           {"end_tid", "UInt32"},
                           {"begin_realtime_ns", "UInt64"},
                           {"end_realtime_ns", "UInt64"},
                           {"latency_ns", "UInt64"},
                           {"lost_adjacent", "UInt8"}},
                          "node, pair, begin_realtime_ns"};
  return t;
}

const TableDef& io_stages_table() {
  static const TableDef t{"io_stages",
                          {{"date", "Date"},
                           {"trace_id", "UInt64"},
                           {"node", "String"},
                           {"pid", "UInt32"},
                           {"process", "String"},
                           {"tid", "UInt32"},
                           {"thread", "String"},
                           {"user_data", "UInt64"},
                           {"dev", "UInt64"},
                           {"sector", "UInt64"},
                           {"user_submit_ns", "UInt64"},
                           {"uring_submit_ns", "UInt64"},
                           {"block_issue_ns", "UInt64"},
                           {"block_complete_ns", "UInt64"},
                           {"uring_complete_ns", "UInt64"},
                           {"user_complete_ns", "UInt64"},
                           {"joined", "UInt8"},
                           {"ordered", "UInt8"},
                           {"submit_ns", "UInt64"},
                           {"queue_ns", "UInt64"},
                           {"device_ns", "UInt64"},
                           {"completion_ns", "UInt64"},
                           {"reap_ns", "UInt64"},
                           {"total_ns", "UInt64"}},
                          "node, user_submit_ns"};
  return t;
}

const TableDef& losses_table() {
  static const TableDef t{"losses",
                          {{"date", "Date"},
                           {"trace_id", "UInt64"},
                           {"node", "String"},
                           {"pid", "UInt32"},
                           {"process", "String"},
                           {"tid", "UInt32"},
                           {"thread", "String"},
                           {"slot", "UInt32"},
                           {"generation", "UInt32"},
                           {"kernel", "UInt8"},
                           {"cause", "String"},
                           {"records", "UInt64"},
                           {"corrupt_blocks", "UInt64"}},
                          "node, trace_id, pid, tid, slot, generation, cause"};
  return t;
}

const TableDef& traces_table() {
  static const TableDef t{"traces",
                          {{"date", "Date"},
                           {"trace_id", "UInt64"},
                           {"node", "String"},
                           {"machine_id", "String"},
                           {"boot_id", "String"},
                           {"source", "String"},
                           {"shipped_ns", "UInt64"},
                           {"clock", "String"},
                           {"ticks_per_second", "UInt64"},
                           {"clock_error_bound_ns", "UInt64"},
                           {"alignment", "String"},
                           {"start_realtime_ns", "UInt64"},
                           {"end_realtime_ns", "UInt64"},
                           {"pids", "Array(UInt32)"},
                           {"processes", "Array(String)"},
                           {"events", "UInt64"},
                           {"intervals", "UInt64"},
                           {"ios", "UInt64"},
                           {"lost", "UInt64"},
                           {"corrupt_blocks", "UInt64"},
                           {"trigger_state", "String"},
                           {"trigger_expression", "String"},
                           {"trigger_event", "String"},
                           {"trigger_pid", "UInt32"},
                           {"trigger_tid", "UInt32"},
                           {"trigger_seq", "UInt64"},
                           {"trigger_realtime_ns", "UInt64"},
                           {"pairs", "Array(String)"}},
                          "node, start_realtime_ns, trace_id"};
  return t;
}

const std::vector<TableDef>& schema_tables() {
  static const std::vector<TableDef> all{events_table(), intervals_table(), io_stages_table(),
                                         losses_table(), traces_table()};
  return all;
}

std::string quote_identifier(const std::string& name) {
  std::string out = "`";
  for (char c : name) {
    if (c == '`' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('`');
  return out;
}

std::string create_local_sql(const TableDef& table, const std::string& database) {
  std::string columns;
  for (const ColumnDef& c : table.columns) {
    columns += fmt::format("{}    {} {}", columns.empty() ? "" : ",\n", c.name, c.type);
  }
  return fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.{}\n(\n{}\n)\nENGINE = MergeTree\nPARTITION BY date\n"
      "ORDER BY ({})",
      quote_identifier(database), quote_identifier(std::string(table.name) + "_local"), columns,
      table.order_by);
}

std::string create_global_sql(const TableDef& table, const std::string& database,
                              const std::string& cluster) {
  const std::string db = quote_identifier(database);
  const std::string local = std::string(table.name) + "_local";
  if (cluster.empty()) {
    return fmt::format("CREATE TABLE IF NOT EXISTS {}.{} AS {}.{}\nENGINE = Merge({}, '^{}$')", db,
                       quote_identifier(table.name), db, quote_identifier(local),
                       quote_identifier(database), local);
  }
  return fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.{} AS {}.{}\nENGINE = Distributed({}, {}, {}, trace_id)", db,
      quote_identifier(table.name), db, quote_identifier(local), quote_identifier(cluster),
      quote_identifier(database), quote_identifier(local));
}

std::vector<std::string> schema_sql(const std::string& database, const std::string& cluster) {
  std::vector<std::string> out{"CREATE DATABASE IF NOT EXISTS " + quote_identifier(database)};
  for (const TableDef& t : schema_tables()) out.push_back(create_local_sql(t, database));
  for (const TableDef& t : schema_tables()) {
    out.push_back(create_global_sql(t, database, cluster));
  }
  return out;
}

}  // namespace nanotrace::ship
