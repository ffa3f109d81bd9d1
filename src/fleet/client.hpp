// The fleet's commands from any node (`nanotrace fleet ...`): arm, disarm, snapshot, status,
// and collect, which gathers a round's snapshot files and manifests from every node's spool
// into a local directory, pulling each file in chunks, one request at a time per node and
// `parallel` nodes at once (the collector, not the nodes, sets the pace: see docs/fleet.md on
// a thousand nodes).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fleet/broker.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

struct ClientOptions {
  BrokerOptions broker;
  std::string fleet = "default";
  size_t nodes = 0;       // answers to wait for (0: whoever answers within the timeout)
  int timeout_ms = 3000;  // for answers
  size_t parallel = 4;    // collect: nodes copied at once
  bool zstd = false;      // collect, fetch: ask the agents for zstd-compressed chunks
};

struct CollectResult {
  std::string round;
  size_t nodes = 0;
  size_t files = 0;
  uint64_t bytes = 0;       // written here
  uint64_t wire_bytes = 0;  // received from the broker (fewer with zstd)
  double seconds = 0;
  std::vector<std::string> errors;  // per node or file
};

class FleetClient {
 public:
  static Result<std::unique_ptr<FleetClient>> connect(const ClientOptions& options);
  // Sends a command to every agent and returns their answers (JSON objects).
  Result<std::vector<nlohmann::json>> command(const std::string& body);
  // Gathers round (empty: the latest round any node holds) from the nodes into dir (created
  // 0700 if missing; files 0600, never over an existing one), waiting up to wait_ms for
  // options.nodes nodes to hold it.
  Result<CollectResult> collect(const std::string& round, const std::string& dir, int wait_ms);
  // Copies one file of a node's spool to output (a new file, 0600). The agent refuses a name
  // that is not a file of its spool. Returns the bytes copied.
  Result<uint64_t> fetch(const std::string& node, const std::string& file,
                         const std::string& output);

 private:
  explicit FleetClient(const ClientOptions& options, std::unique_ptr<Broker> broker)
      : options_(options), broker_(std::move(broker)) {}
  // Copies node's file into a new file local_name of dir_fd.
  Status fetch_file(const std::string& node, const std::string& file, int dir_fd,
                    const std::string& local_name, uint64_t* bytes, uint64_t* wire = nullptr);
  // Copies a node's manifest and snapshot files of a round into dir_fd (collect's one node).
  struct NodeCopy {
    size_t files = 0;
    uint64_t bytes = 0, wire_bytes = 0;
    std::vector<std::string> errors;
  };
  NodeCopy copy_node(const std::string& node, const nlohmann::json& manifest, int dir_fd);
  // collect's copy: each holder's files (node -> its manifest), `parallel` nodes at once.
  void copy_holders(const std::map<std::string, nlohmann::json>& holding, int dir_fd,
                    CollectResult* result);
  ClientOptions options_;
  std::unique_ptr<Broker> broker_;
};

}  // namespace nanotrace::fleet
