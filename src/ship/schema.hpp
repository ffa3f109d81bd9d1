// The ClickHouse schema traces are shipped into (docs/clickhouse.md explains it): five
// tables, each a MergeTree on every shard (`<name>_local`) partitioned by day, and a table
// over all shards under the plain name (a Distributed table over a cluster, or, on a server
// without one, a Merge table over the local one) for queries.
//
// The definitions are data: the DDL and the Native blocks the shipper sends are made from the
// same column lists, so the two cannot disagree. Types are those ClickHouse 18.16 (Debian 12)
// and current releases share: no LowCardinality, DateTime64, Map, TTL or codecs.
#pragma once

#include <string>
#include <vector>

namespace nanotrace::ship {

struct ColumnDef {
  const char* name;
  const char* type;
};

struct TableDef {
  const char* name;  // events, intervals, io_stages, losses, traces
  std::vector<ColumnDef> columns;
  const char* order_by;
};

// The five tables, in the order a trace is shipped (traces last: its row marks the trace as
// stored).
const std::vector<TableDef>& schema_tables();
const TableDef& events_table();
const TableDef& intervals_table();
const TableDef& io_stages_table();
const TableDef& losses_table();
const TableDef& traces_table();

// CREATE TABLE IF NOT EXISTS db.<name>_local (...) ENGINE = MergeTree ...
std::string create_local_sql(const TableDef& table, const std::string& database);
// CREATE TABLE IF NOT EXISTS db.<name> over the shards: Distributed(cluster, db, <name>_local,
// trace_id) with a cluster, Merge(db, '^<name>_local$') without.
std::string create_global_sql(const TableDef& table, const std::string& database,
                              const std::string& cluster);
// The statements that create the database and every table (what docs/clickhouse.md shows).
std::vector<std::string> schema_sql(const std::string& database, const std::string& cluster);

// `name` as a quoted identifier (backquotes, with \ and ` escaped).
std::string quote_identifier(const std::string& name);

}  // namespace nanotrace::ship
