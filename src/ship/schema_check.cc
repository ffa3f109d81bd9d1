// check_tables: system.columns against the schema's column lists.
#include "ship/schema_check.hpp"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "ship/clickhouse_http.hpp"
#include "ship/native_block.hpp"
#include "ship/schema.hpp"
#include "ship/shipper.hpp"

namespace nanotrace::ship {

Status check_tables(ClickHouseHttp& server, const std::string& database,
                    std::vector<std::string>* added) {
  auto rows = server.query_rows(
      fmt::format("SELECT table, name, type FROM system.columns WHERE database = {}",
                  quote_string(database)),
      3);
  if (!rows.ok()) return rows.status();
  std::map<std::pair<std::string, std::string>, std::string> types;  // (table, column) -> type
  for (auto& row : *rows) types[{row[0], row[1]}] = std::move(row[2]);
  for (const TableDef& t : schema_tables()) {
    // The shard's table first: the table over the shards reads it.
    for (const std::string& table : {std::string(t.name) + "_local", std::string(t.name)}) {
      for (const ColumnDef& c : t.columns) {
        auto it = types.find({table, c.name});
        if (it == types.end()) {
          auto done = server.query(fmt::format("ALTER TABLE {}.{} ADD COLUMN {} {}",
                                               quote_identifier(database), quote_identifier(table),
                                               quote_identifier(c.name), c.type));
          if (!done.ok()) return done.status();
          if (added != nullptr) added->push_back(table + "." + c.name);
          continue;
        }
        if (parse_column_type(it->second) != parse_column_type(c.type)) {
          return Status::Invalid(fmt::format(
              "ClickHouse at {} refused: {}.{}.{} is {} there and {} in nanotrace's schema (a "
              "table created by something else, or changed: rename it, or ship into another "
              "--database)",
              server.url(), database, table, c.name, it->second, c.type));
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace nanotrace::ship
