// Shipping traces into ClickHouse (`nanotrace ship`): the schema of ship/schema.hpp created
// on every shard, then each trace sent to one shard, all of it or none of it, once.
//
// Sharding: a trace goes whole to the shard trace_id % shards (the rule of the Distributed
// tables' sharding key, trace_id, over shards of equal weight listed in the same order), so
// one trace's rows live on one server and its insert is decided there.
//
// One trace, on its shard:
//   0. The trace id covers what can be read: a trace that proves damaged while its rows are
//      built (corrupt blocks) is staged again under the id of its damage (trace_rows.hpp);
//      one found stored already is read whole first, so that a damaged copy of a stored
//      trace is never taken for it.
//   1. Stored already? Its row in traces_local (written last) says so: nothing is sent, and
//      the report says under which node names and with which pairs it is stored.
//   2. Rows an interrupted earlier attempt attached are deleted (ALTER ... DELETE, waited for).
//   3. Every row goes into staging tables of its own (CREATE TABLE ... AS <table>_local), in
//      Native blocks (compressed with zstd unless the server is on this machine), sent on
//      several connections at once (BlockSenders), and the staged counts are checked.
//   4. Each staged partition (a day) is attached to the real table (ATTACH PARTITION ID ...
//      FROM: the parts are linked in, at once per partition), the counts are checked there,
//      and the trace's row is inserted: the trace is stored.
// A server error or a dropped connection before step 4 leaves nothing in the real tables
// (the staging tables are dropped, now or by the next attempt); one during step 4 leaves
// rows that the next attempt deletes first, and which queries filtering on `traces` (every
// query of docs/clickhouse.md does) do not see. Either way the error says which.
//
// Errors: kIoError transient (the server or the connection: try again later), kInvalidArgument
// refused (the server refuses the requests, the schema differs, a bad option: trying again
// cannot help), kCorrupt (the trace reads differently each time: a live source that changed).
//
// Thread safety: a Shipper belongs to one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nanotrace/analysis.hpp"
#include "nanotrace/reader.hpp"
#include "nanotrace/status.hpp"
#include "ship/trace_rows.hpp"

namespace nanotrace::ship {

class ClickHouseHttp;

enum class Compression { kAuto, kZstd, kNone };

struct ShipOptions {
  std::vector<std::string> servers;  // one HTTP URL per shard
  std::string database = "nanotrace";
  // The cluster (remote_servers in the servers' configuration) the Distributed tables span;
  // "" on one server: the tables over the shards are Merge tables over the local ones.
  std::string cluster;
  // The name of a trace's one node: "" = the name the trace records, else the local hostname.
  std::string node;
  std::vector<PairRule> pairs;  // empty: the pairs the event names suggest
  size_t batch_rows = 1 << 20;  // rows per Native block (ClickHouse's max_insert_block_size)
  // Inserts in flight at once, each on its own connection (the server writes each on a
  // thread of its own).
  size_t connections = 2;
  // kAuto: zstd to a server elsewhere, none to one on this machine (a loopback address),
  // where compressing only costs CPU on both sides.
  Compression compress = Compression::kAuto;
  // Optional, outliving the Shipper: once true, a ship in progress ends within about a
  // second (kIoError; as any dropped connection, it leaves nothing a retry cannot replace).
  const std::atomic<bool>* cancel = nullptr;
};

struct ShipReport {
  uint64_t trace_id = 0;
  std::vector<std::string> nodes;  // its nodes' names
  std::string server;              // the shard's URL
  bool already_stored = false;     // shipped before: nothing sent
  uint64_t replaced_rows = 0;      // rows an interrupted earlier attempt had left, deleted
  RowCounts counts;
  std::vector<std::string> skipped_pairs;  // rules that did not resolve against the trace
  std::vector<std::string> pairs;          // the pairs whose intervals this ship made
  Damage damage;                           // what could not be read (stored as lost)
  // Already stored: what the store holds of it, and what of this ship it does not (a trace
  // is stored once: a reship under another name or with other pairs changes nothing).
  std::vector<std::string> stored_nodes, stored_pairs;
  std::vector<std::string> nodes_not_stored, pairs_not_stored;
};

class Shipper {
 public:
  // Connects to every server and creates the database and tables where they are missing.
  static Result<std::unique_ptr<Shipper>> connect(const ShipOptions& options);
  ~Shipper();
  Shipper(const Shipper&) = delete;
  Shipper& operator=(const Shipper&) = delete;

  // Ships one trace; source names it in the traces table (a path).
  Result<ShipReport> ship(Trace& trace, const std::string& source);

 private:
  explicit Shipper(ShipOptions options);
  struct Attempt;
  Status stage(ClickHouseHttp& server, size_t shard, TraceRows& rows, Attempt& a);
  // The connections shard's blocks are inserted on (options_.connections, kept open).
  Result<std::vector<ClickHouseHttp*>> senders(size_t shard);
  Status commit(ClickHouseHttp& server, TraceRows& rows, const std::string& source, Attempt& a);
  Status delete_leftovers(ClickHouseHttp& server, Attempt& a, uint64_t* deleted);
  Status compare_stored(ClickHouseHttp& server, const Attempt& a, ShipReport* report);
  // The trace's rows in each real table but traces (schema_tables()' order), in one query.
  Result<std::vector<uint64_t>> trace_counts(ClickHouseHttp& server, const Attempt& a);
  void drop_staging(ClickHouseHttp& server, const Attempt& a);

  ShipOptions options_;
  // Whether blocks to the shard are compressed (ShipOptions::compress resolved).
  bool compress(const ClickHouseHttp& server) const;
  std::vector<std::unique_ptr<ClickHouseHttp>> servers_;
  std::map<size_t, std::vector<std::unique_ptr<ClickHouseHttp>>> senders_;  // by shard
  std::string block_bytes_;
};

// s as a ClickHouse string literal ('...' with ' and \ escaped).
std::string quote_string(const std::string& s);

}  // namespace nanotrace::ship
