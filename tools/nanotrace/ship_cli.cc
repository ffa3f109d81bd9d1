// The options of `nanotrace ship` (ship_command.hpp), registered by both executables (see
// fleet_cli.cc).
#include "ship_command.hpp"

namespace nanotrace::cli {

void register_ship_command(CLI::App& app, ShipCommand* c) {
  c->ship = app.add_subcommand(
      "ship",
      "Ship traces into ClickHouse (events, begin/end intervals, I/O stages, losses), each once");
  c->ship->add_option("SRC", c->sources, "Trace files, directories of them, or live sources")
      ->required();
  c->ship
      ->add_option("--clickhouse", c->servers,
                   "ClickHouse HTTP URL (http://host:8123); repeat for shards: a trace goes "
                   "whole to shard trace_id % shards")
      ->required();
  c->ship->add_option("--database", c->database, "Database (created if missing)")
      ->capture_default_str();
  c->ship->add_option("--cluster", c->cluster,
                      "Cluster of the servers' remote_servers the Distributed tables span "
                      "(default: one server, Merge tables)");
  c->ship->add_option(
      "--node", c->node,
      "The name of a one-node trace's node (default: the name the trace records, else this "
      "host's name)");
  c->ship->add_option("--pair", c->pairs,
                      "BEGIN,END,KEY pairs whose intervals to store (default: inferred from "
                      "event names)");
  c->ship->add_option("--batch-rows", c->batch_rows, "Rows per insert block")
      ->capture_default_str();
  c->ship
      ->add_option("--connections", c->connections,
                   "Inserts in flight at once, each on its own connection (1 to 16)")
      ->capture_default_str();
  c->ship
      ->add_option("--retry-for", c->retry_for,
                   "How long to retry a trace after a transient error (connection, server "
                   "busy), with backoff; refusals are not retried (0: no retry)")
      ->capture_default_str();
  c->ship
      ->add_option("--compress", c->compress,
                   "Blocks sent zstd-compressed (zstd), as they are (none), or zstd unless the "
                   "server is on this machine (auto)")
      ->check(CLI::IsMember({"auto", "zstd", "none"}))
      ->capture_default_str();
  c->ship->add_flag("--no-compress", c->no_compress, "Send blocks uncompressed (--compress none)");
  c->ship->add_flag("--json", c->json, "One JSON object per trace");
}

}  // namespace nanotrace::cli
