// The fleet's commands from any node (`nanotrace fleet ...`): arm, disarm, snapshot, status,
// and collect, which gathers a round's snapshot files and manifests from every node's spool
// into a local directory, pulling each file in chunks, one request at a time per node and
// `parallel` nodes at once (the collector, not the nodes, sets the pace: see docs/fleet.md on
// a thousand nodes).
//
// Every answer is read with its type's parser (message_answers.hpp): an answer that cannot be
// read is one error line naming the node that sent it (when its bytes name one), and the
// others are used as if it had not come. Nodes expected and missing are named when the caller
// names the nodes it expects (ClientOptions::node_names); with a count only, the nodes that
// answered are.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fleet/broker.hpp"
#include "fleet/message_answers.hpp"
#include "fleet/message_status.hpp"
#include "fleet/protocol.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

struct ClientOptions {
  BrokerOptions broker;
  std::string fleet = "default";
  size_t nodes = 0;  // answers to wait for (0: whoever answers within the timeout)
  // The nodes expected by name (then `nodes` is their count): a shortfall names the missing.
  std::vector<std::string> node_names;
  int timeout_ms = 3000;  // for answers
  size_t parallel = 4;    // collect: nodes copied at once
  bool zstd = false;      // collect, fetch: ask the agents for zstd-compressed chunks
};

struct CollectResult {
  std::string round;
  size_t nodes = 0;         // copied whole
  size_t files = 0;         // snapshots copied (besides the manifests)
  uint64_t bytes = 0;       // written here
  uint64_t wire_bytes = 0;  // received from the broker (fewer with zstd)
  double seconds = 0;
  std::vector<std::string> errors;  // per node or file, each naming its node
};

// An answer that could not be read.
struct UnreadableAnswer {
  std::string node;    // as the answer named it (printable), "" if it names none
  std::string reason;  // "malformed status answer: rounds: not a list"
  // "node evil: malformed status answer: ...", "an answer naming no node: ..."
  std::string line() const;
};

// Every node's answer to one command.
template <class T>
struct Answers {
  std::vector<T> answers;                    // the readable ones (a node's error too), by node
  std::vector<UnreadableAnswer> unreadable;  // by node
  std::set<std::string> answered;            // every node named by an answer, readable or not
  std::string shortfall;  // fewer nodes than expected: who answered, or who did not; or ""
};

class FleetClient {
 public:
  static Result<std::unique_ptr<FleetClient>> connect(const ClientOptions& options);
  // Sends a command to every agent and reads their answers as T (the command's answer type:
  // message_answers.hpp, message_status.hpp), waiting for options.nodes of them (or the
  // nodes named) at most options.timeout_ms. Errors: the broker's only.
  template <class T>
  Result<Answers<T>> ask(const Command& command);
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
  // Copies node's file into a new file local_name of dir_fd; more than limit bytes is an error
  // (the size the node's manifest gave).
  Status fetch_file(const std::string& node, const std::string& file, int dir_fd,
                    const std::string& local_name, uint64_t limit, uint64_t* bytes,
                    uint64_t* wire = nullptr);
  // Copies a node's manifest and snapshot files of a round into dir_fd (collect's one node).
  struct NodeCopy {
    size_t files = 0;
    uint64_t bytes = 0, wire_bytes = 0;
    std::vector<std::string> errors;
  };
  NodeCopy copy_node(const std::string& node, const Manifest& manifest, int dir_fd);
  // collect's copy: each holder's files (node -> its manifest), `parallel` nodes at once.
  void copy_holders(const std::map<std::string, Manifest>& holding, int dir_fd,
                    CollectResult* result);
  // True once enough nodes answered readably to stop waiting (options.nodes, node_names).
  bool enough(const std::set<std::string>& readable) const;
  // Who is missing among the nodes expected, given who answered ("" if nobody).
  std::string shortfall(const std::set<std::string>& answered) const;
  // What collect's polls found (client.cc).
  struct RoundsSeen;
  // True once the nodes asked for (options.nodes, node_names; else any) hold the round.
  bool holders_enough(const RoundsSeen& seen) const;
  // collect's "only 3 of 4 nodes hold round R", naming the nodes that answered without it,
  // that answered unreadably, or (when expected by name) that did not answer; "" if none.
  std::string holders_shortfall(const std::string& round, const RoundsSeen& seen) const;
  ClientOptions options_;
  std::unique_ptr<Broker> broker_;
};

}  // namespace nanotrace::fleet
