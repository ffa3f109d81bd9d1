// Shipper: the schema on every shard, and each trace staged, checked and attached on its own.
#include "ship/shipper.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "ship/block_senders.hpp"
#include "ship/clickhouse_answer.hpp"
#include "ship/clickhouse_http.hpp"
#include "ship/schema.hpp"
#include "ship/schema_check.hpp"

namespace nanotrace::ship {
namespace {

// How long a deletion of an earlier attempt's rows may take to finish.
constexpr auto kMutationWait = std::chrono::seconds(120);

// A day number (since 1970-01-01) as a Date literal.
std::string date_literal(uint16_t day) {
  const std::chrono::year_month_day d{std::chrono::sys_days{std::chrono::days{day}}};
  return fmt::format("toDate('{:04}-{:02}-{:02}')", static_cast<int>(d.year()),
                     static_cast<unsigned>(d.month()), static_cast<unsigned>(d.day()));
}

// Several counts in one query: SELECT (SELECT count() FROM ...), (...), ...
Result<std::vector<uint64_t>> counts(ClickHouseHttp& server,
                                     const std::vector<std::string>& queries) {
  std::vector<uint64_t> out;
  if (queries.empty()) return out;
  std::string sql = "SELECT ";
  for (size_t i = 0; i < queries.size(); ++i) sql += (i ? ", (" : "(") + queries[i] + ")";
  auto rows = server.query_rows(sql, queries.size());
  if (!rows.ok()) return rows.status();
  if (rows->size() != 1) {
    return Status::IoError(
        fmt::format("ClickHouse at {}: {} rows of counts, not 1", server.url(), rows->size()));
  }
  for (const std::string& v : (*rows)[0]) {
    auto n = parse_count(v);
    if (!n.ok())
      return Status::IoError(
          fmt::format("ClickHouse at {}: {}", server.url(), n.status().message()));
    out.push_back(*n);
  }
  return out;
}

}  // namespace

std::string quote_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

// One trace's shipping: where its rows go and what they must add up to.
struct Shipper::Attempt {
  uint64_t trace_id = 0;
  std::string db;                    // quoted
  std::vector<std::string> staging;  // per table of schema_tables() but traces
  std::vector<bool> created;         // which of them exist (made at their first block)
  std::vector<uint64_t> expected;    // rows per staging table
  // WHERE clause that finds the trace's rows in a real table (the days' partitions only).
  std::string where;

  std::string local(const TableDef& t) const {
    return db + "." + quote_identifier(std::string(t.name) + "_local");
  }
};

Shipper::Shipper(ShipOptions options) : options_(std::move(options)) {}
Shipper::~Shipper() = default;

Result<std::unique_ptr<Shipper>> Shipper::connect(const ShipOptions& options) {
  if (options.servers.empty()) return Status::Invalid("no ClickHouse server given (--clickhouse)");
  if (options.database.empty()) return Status::Invalid("--database: empty name");
  if (options.batch_rows == 0) return Status::Invalid("--batch-rows: must be at least 1");
  if (options.connections == 0 || options.connections > 16) {
    return Status::Invalid("--connections: 1 to 16");
  }
  std::unique_ptr<Shipper> s(new Shipper(options));
  for (const std::string& url : options.servers) {
    auto server = ClickHouseHttp::open(url, options.cancel);
    if (!server.ok()) return server.status();
    for (const std::string& sql : schema_sql(options.database, options.cluster)) {
      auto done = (*server)->query(sql);
      if (!done.ok()) {
        return Status(done.status().code(),
                      fmt::format("creating the schema: {}", done.status().message()));
      }
    }
    if (Status checked = check_tables(**server, options.database, nullptr); !checked.ok()) {
      return Status(checked.code(), fmt::format("checking the schema: {}", checked.message()));
    }
    s->servers_.push_back(std::move(*server));
  }
  return s;
}

bool Shipper::compress(const ClickHouseHttp& server) const {
  return options_.compress == Compression::kZstd ||
         (options_.compress == Compression::kAuto && !server.loopback());
}

void Shipper::drop_staging(ClickHouseHttp& server, const Attempt& a) {
  for (size_t i = 0; i < a.staging.size(); ++i) {
    if (i < a.created.size() && a.created[i]) {
      (void)server.query("DROP TABLE IF EXISTS " + a.staging[i]);
    }
  }
}

Result<std::vector<ClickHouseHttp*>> Shipper::senders(size_t shard) {
  std::vector<std::unique_ptr<ClickHouseHttp>>& pool = senders_[shard];
  while (pool.size() < options_.connections) {
    auto c = ClickHouseHttp::open(options_.servers[shard], options_.cancel);
    if (!c.ok()) return c.status();
    pool.push_back(std::move(*c));
  }
  std::vector<ClickHouseHttp*> out;
  for (auto& c : pool) out.push_back(c.get());
  return out;
}

Status Shipper::stage(ClickHouseHttp& server, size_t shard, TraceRows& rows, Attempt& a) {
  const std::vector<TableDef>& tables = schema_tables();
  const std::string prefix = fmt::format("_stage_{:016x}_", a.trace_id);
  // Staging tables a dead connection left: gone before anything is staged.
  auto left = server.query_rows(
      fmt::format("SELECT name FROM system.tables WHERE database = {} AND startsWith(name, {})",
                  quote_string(options_.database), quote_string(prefix)),
      1);
  if (!left.ok()) return left.status();
  for (const auto& row : *left) {
    auto done = server.query("DROP TABLE IF EXISTS " + a.db + "." + quote_identifier(row[0]));
    if (!done.ok()) return done.status();
  }
  for (size_t i = 0; i + 1 < tables.size(); ++i) {
    a.staging.push_back(a.db + "." + quote_identifier(prefix + tables[i].name));
  }
  a.created.assign(a.staging.size(), false);
  // Each staging table is made when its first block comes (a trace without I/O stages or
  // losses makes none for them). Its blocks go on `connections` connections at once, while
  // the next ones are built.
  auto connections = senders(shard);
  if (!connections.ok()) return connections.status();
  BlockSenders sending(connections->size(),
                       [&, compressed = compress(server)](size_t c, const std::string& into,
                                                          const std::vector<std::string_view>& b) {
                         return (*connections)[c]->insert_native(into, b, compressed);
                       });
  auto sink = [&](const TableDef& table, NativeBlock& block) -> Status {
    size_t i = 0;
    while (tables[i].name != table.name) ++i;
    if (!a.created[i]) {
      auto done = server.query("CREATE TABLE " + a.staging[i] + " AS " + a.local(tables[i]));
      if (!done.ok()) return done.status();
      a.created[i] = true;
    }
    return sending.send(table, a.staging[i], &block);
  };
  Status written = rows.write(options_.batch_rows, sink);
  Status sent = sending.finish();
  if (!written.ok()) return written;
  if (!sent.ok()) return sent;
  const RowCounts& c = rows.counts();
  a.expected = {c.events, c.intervals, c.ios, c.losses};  // in schema_tables()' order
  std::vector<std::string> queries;
  std::vector<size_t> which;
  for (size_t i = 0; i < a.staging.size(); ++i) {
    if (!a.created[i]) continue;
    queries.push_back("SELECT count() FROM " + a.staging[i]);
    which.push_back(i);
  }
  auto n = counts(server, queries);
  if (!n.ok()) return n.status();
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = which[k];
    if ((*n)[k] != a.expected[i]) {
      return Status::IoError(fmt::format("{} holds {} rows after the insert, not the {} sent",
                                         a.staging[i], (*n)[k], a.expected[i]));
    }
  }
  return Status::Ok();
}

Result<std::vector<uint64_t>> Shipper::trace_counts(ClickHouseHttp& server, const Attempt& a) {
  std::vector<std::string> queries;
  for (const TableDef& t : schema_tables()) {
    if (std::string_view(t.name) == "traces") continue;
    queries.push_back(fmt::format("SELECT count() FROM {} WHERE {}", a.local(t), a.where));
  }
  return counts(server, queries);
}

Status Shipper::delete_leftovers(ClickHouseHttp& server, Attempt& a, uint64_t* deleted) {
  const std::vector<TableDef>& tables = schema_tables();
  auto n = trace_counts(server, a);
  if (!n.ok()) return n.status();
  for (size_t i = 0; i + 1 < tables.size(); ++i) {
    if ((*n)[i] == 0) continue;
    *deleted += (*n)[i];
    auto done = server.query(
        fmt::format("ALTER TABLE {} DELETE WHERE trace_id = {}", a.local(tables[i]), a.trace_id));
    if (!done.ok()) return done.status();
    const std::string pending = fmt::format(
        "SELECT count() FROM system.mutations WHERE database = {} AND table = {} AND is_done = 0",
        quote_string(options_.database), quote_string(std::string(tables[i].name) + "_local"));
    const auto deadline = std::chrono::steady_clock::now() + kMutationWait;
    for (;;) {
      auto left = server.query_count(pending);
      if (!left.ok()) return left.status();
      if (*left == 0) break;
      if (options_.cancel != nullptr && options_.cancel->load()) {
        return Status::IoError("cancelled while waiting for the deletion of earlier rows");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::IoError(fmt::format(
            "the deletion of trace {:016x}'s earlier rows in {} did not finish within {} s",
            a.trace_id, a.local(tables[i]), kMutationWait.count()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return Status::Ok();
}

Status Shipper::commit(ClickHouseHttp& server, TraceRows& rows, const std::string& source,
                       Attempt& a) {
  const std::vector<TableDef>& tables = schema_tables();
  // Each staged partition (a day) attached: its parts are linked into the real table.
  std::string names;
  for (size_t i = 0; i < a.staging.size(); ++i) {
    if (!a.created[i]) continue;
    names += (names.empty() ? "" : ", ") +
             quote_string(fmt::format("_stage_{:016x}_{}", a.trace_id, tables[i].name));
  }
  if (!names.empty()) {
    auto parts = server.query_rows(
        fmt::format("SELECT DISTINCT table, partition_id FROM system.parts WHERE database = {} "
                    "AND table IN ({}) AND active",
                    quote_string(options_.database), names),
        2);
    if (!parts.ok()) return parts.status();
    for (const auto& part : *parts) {
      size_t i = 0;
      while (i < a.staging.size() &&
             part[0] != fmt::format("_stage_{:016x}_{}", a.trace_id, tables[i].name)) {
        ++i;
      }
      if (i == a.staging.size()) continue;
      auto done =
          server.query(fmt::format("ALTER TABLE {} ATTACH PARTITION ID {} FROM {}",
                                   a.local(tables[i]), quote_string(part[1]), a.staging[i]));
      if (!done.ok()) return done.status();
    }
  }
  // Every table holds the trace's rows as sent (a table nothing was staged for: none).
  auto n = trace_counts(server, a);
  if (!n.ok()) return n.status();
  for (size_t i = 0; i < a.staging.size(); ++i) {
    const uint64_t want = a.created[i] ? a.expected[i] : 0;
    if ((*n)[i] != want) {
      return Status::IoError(fmt::format("{} holds {} rows of trace {:016x}, not the {} sent",
                                         a.local(tables[i]), (*n)[i], a.trace_id, want));
    }
  }
  NativeBlock row = block_for(traces_table());
  rows.traces_rows(source, &row);
  block_bytes_.clear();
  if (Status s = row.write(&block_bytes_); !s.ok()) {
    return Status::Invalid(fmt::format("the traces row: {}", s.message()));
  }
  if (Status s = server.insert_native(a.local(traces_table()), block_bytes_, compress(server));
      !s.ok()) {
    return s;
  }
  auto stored = server.query_count(fmt::format("SELECT count() FROM {} WHERE trace_id = {}",
                                               a.local(traces_table()), a.trace_id));
  if (!stored.ok()) return stored.status();
  if (*stored != row.rows()) {
    return Status::IoError(fmt::format("{} holds {} rows of trace {:016x}, not {}",
                                       a.local(traces_table()), *stored, a.trace_id, row.rows()));
  }
  return Status::Ok();
}

namespace {

std::vector<std::string> column_of(std::vector<std::vector<std::string>> rows) {
  std::vector<std::string> out;
  for (auto& r : rows) out.push_back(std::move(r[0]));
  return out;
}

std::vector<std::string> missing_from(const std::vector<std::string>& wanted,
                                      const std::vector<std::string>& stored) {
  std::vector<std::string> out;
  for (const std::string& w : wanted) {
    if (std::find(stored.begin(), stored.end(), w) == stored.end()) out.push_back(w);
  }
  return out;
}

}  // namespace

// What the store holds of a trace stored already, against what this ship would have stored.
Status Shipper::compare_stored(ClickHouseHttp& server, const Attempt& a, ShipReport* report) {
  const std::string where = fmt::format("WHERE trace_id = {}", a.trace_id);
  auto nodes = server.query_rows(
      fmt::format("SELECT DISTINCT node FROM {} {} ORDER BY node", a.local(traces_table()), where),
      1);
  if (!nodes.ok()) return nodes.status();
  auto pairs = server.query_rows(fmt::format("SELECT DISTINCT arrayJoin(pairs) AS p FROM {} {} "
                                             "ORDER BY p",
                                             a.local(traces_table()), where),
                                 1);
  if (!pairs.ok()) return pairs.status();
  if (pairs->empty()) {
    // Stored before traces rows named their pairs: its intervals do.
    pairs = server.query_rows(fmt::format("SELECT DISTINCT pair FROM {} {} ORDER BY pair",
                                          a.local(intervals_table()), where),
                              1);
    if (!pairs.ok()) return pairs.status();
  }
  report->stored_nodes = column_of(std::move(*nodes));
  report->stored_pairs = column_of(std::move(*pairs));
  report->nodes_not_stored = missing_from(report->nodes, report->stored_nodes);
  report->pairs_not_stored = missing_from(report->pairs, report->stored_pairs);
  return Status::Ok();
}

Result<ShipReport> Shipper::ship(Trace& trace, const std::string& source) {
  // The trace is taken as intact until a read shows otherwise; a file whose tail was ignored
  // is known damaged at once, and read whole first for its id.
  Damage assumed;
  bool verified = false;
  if (!trace.warning().empty()) {
    assumed = read_damage(trace);
    verified = true;
  }
  for (int pass = 0;; ++pass) {
    auto opened = TraceRows::open(trace, options_.node, options_.pairs, assumed.digest);
    if (!opened.ok()) return opened.status();
    TraceRows& rows = **opened;
    ShipReport report;
    report.trace_id = rows.trace_id();
    report.nodes = rows.node_names();
    report.skipped_pairs = rows.skipped_pairs();
    report.pairs = rows.pair_labels();
    report.damage = assumed;
    const size_t shard = rows.trace_id() % servers_.size();
    ClickHouseHttp& server = *servers_[shard];
    report.server = server.url();
    Attempt a;
    a.trace_id = rows.trace_id();
    a.db = quote_identifier(options_.database);
    const std::string id = fmt::format("{:016x}", a.trace_id);
    auto stored = server.query_count(fmt::format("SELECT count() FROM {} WHERE trace_id = {}",
                                                 a.local(traces_table()), a.trace_id));
    if (!stored.ok()) return stored.status();
    if (*stored > 0) {
      if (!verified) {
        // Stored as an intact trace: is this file one?
        verified = true;
        Damage found = read_damage(trace);
        if (found.damaged()) {
          assumed = std::move(found);
          continue;
        }
      }
      report.already_stored = true;
      if (Status s = compare_stored(server, a, &report); !s.ok()) {
        return Status(s.code(), fmt::format("trace {} from {} is stored already, but: {}", id,
                                            source, s.message()));
      }
      return report;
    }
    if (Status s = stage(server, shard, rows, a); !s.ok()) {
      drop_staging(server, a);
      return Status(s.code(), fmt::format("trace {} from {}: {}; nothing of it is stored", id,
                                          source, s.message()));
    }
    if (rows.damage().digest != assumed.digest) {
      // It read otherwise than its id says: staged again under the id of what was read.
      drop_staging(server, a);
      if (pass > 0) {
        return Status::Corrupt(fmt::format(
            "trace {} from {} read differently twice (a live source that changed?); nothing "
            "of it is stored",
            id, source));
      }
      assumed = rows.damage();
      verified = true;
      continue;
    }
    report.counts = rows.counts();
    report.damage = rows.damage();
    a.where =
        fmt::format("date >= {} AND date <= {} AND trace_id = {}", date_literal(rows.first_day()),
                    date_literal(rows.last_day()), a.trace_id);
    if (Status s = delete_leftovers(server, a, &report.replaced_rows); !s.ok()) {
      drop_staging(server, a);
      return Status(s.code(), fmt::format("trace {} from {}: {}; nothing of it is stored", id,
                                          source, s.message()));
    }
    if (Status s = commit(server, rows, source, a); !s.ok()) {
      drop_staging(server, a);
      return Status(s.code(),
                    fmt::format("trace {} from {}: {}; it is not stored (rows attached so "
                                "far are replaced when it is shipped again)",
                                id, source, s.message()));
    }
    drop_staging(server, a);
    return report;
  }
}

}  // namespace nanotrace::ship
