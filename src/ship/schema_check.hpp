// One server's tables checked against the schema (schema.hpp) before anything is shipped to
// it, so that a table that differs is found once, named, and refused, instead of an insert
// failing (and being retried) for every trace:
//   - a column the schema has and a table lacks (tables an earlier nanotrace created, before
//     the column was added) is added: ALTER TABLE ... ADD COLUMN, on the shard's table and
//     then on the table over the shards; rows stored before read it as 0 or empty;
//   - a column whose type differs from the schema's is refused (kInvalidArgument, naming the
//     table, the column and both types): no insert could succeed, and none is tried;
//   - columns the schema does not have are left alone (a Native insert fills them with their
//     defaults).
#pragma once

#include <string>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::ship {

class ClickHouseHttp;

// Checks (and completes) database's tables on server. added: "table.column" of each column
// added (may be null). Errors: the server's (clickhouse_http.hpp), kInvalidArgument for a
// type that differs.
Status check_tables(ClickHouseHttp& server, const std::string& database,
                    std::vector<std::string>* added);

}  // namespace nanotrace::ship
