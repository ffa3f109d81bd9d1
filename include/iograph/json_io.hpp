// iograph: graphs as JSON documents, the exchange format of `iograph gen` and `iograph run`.
//
//   {"format": "iograph", "version": 1, "description": "chain(8) nodes=128 ...",
//    "nodes": [{"op": "read", "file": 0, "offset": 0, "length": 4096, "buffer": 0}, ...],
//    "edges": [[0, 1], ...]}
//
// Node ids are positions in "nodes"; an edge [u, v] means v runs after u succeeded.
//
// Thread safety: all functions are reentrant; they share no state.
#pragma once

#include <string>
#include <string_view>

#include "iograph/graph.hpp"

namespace iograph {

// graph_to_json: serializes a graph (finalized or not) as an indented JSON document.
std::string graph_to_json(const Graph& graph);

// graph_from_json: parses and finalizes a graph.
// Errors: kCorrupt for malformed JSON or missing/mistyped fields (the message names the
// field and node), kInvalidArgument for a bad edge or a cycle.
Result<Graph> graph_from_json(std::string_view text);

// save_graph: writes graph_to_json(graph) to `path` (replacing it).
// Errors: kIoError when the file cannot be written.
Status save_graph(const Graph& graph, const std::string& path);

// load_graph: reads and parses `path`.
// Errors: kNotFound when the file does not exist, kIoError when it cannot be read, and the
// errors of graph_from_json.
Result<Graph> load_graph(const std::string& path);

}  // namespace iograph
