// JSON persistence of graphs (nlohmann-json). Parse errors are caught here and turned into
// Status values so no exception leaves the library.
#include "iograph/json_io.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace iograph {

using nlohmann::json;

std::string graph_to_json(const Graph& graph) {
  json doc;
  doc["format"] = "iograph";
  doc["version"] = 1;
  doc["description"] = graph.description;
  json nodes = json::array();
  for (const Node& node : graph.nodes()) {
    nodes.push_back({{"op", op_name(node.op)},
                     {"file", node.file},
                     {"offset", node.offset},
                     {"length", node.length},
                     {"buffer", node.buffer}});
  }
  doc["nodes"] = std::move(nodes);
  json edges = json::array();
  for (const auto& [from, to] : graph.edges()) edges.push_back({from, to});
  doc["edges"] = std::move(edges);
  return doc.dump(1) + "\n";
}

namespace {

// Reads an unsigned integer field, or explains which one is wrong.
template <class T>
Status read_unsigned(const json& object, const char* key, size_t index, T& out, bool required) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (!required) return Status::Ok();
    return Status::Corrupt(fmt::format("graph JSON: node {} has no \"{}\"", index, key));
  }
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return Status::Corrupt(
        fmt::format("graph JSON: node {} field \"{}\" must be a non-negative integer", index, key));
  }
  uint64_t value = it->get<uint64_t>();
  if (value > std::numeric_limits<T>::max()) {
    return Status::Corrupt(
        fmt::format("graph JSON: node {} field \"{}\" is too large", index, key));
  }
  out = static_cast<T>(value);
  return Status::Ok();
}

}  // namespace

Result<Graph> graph_from_json(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Corrupt("graph JSON: not valid JSON");
  if (!doc.is_object()) return Status::Corrupt("graph JSON: the document must be an object");
  if (auto f = doc.find("format"); f == doc.end() || *f != "iograph") {
    return Status::Corrupt("graph JSON: \"format\" must be \"iograph\"");
  }
  if (auto v = doc.find("version"); v == doc.end() || *v != 1) {
    return Status::Unsupported("graph JSON: only \"version\": 1 is supported");
  }
  auto nodes = doc.find("nodes");
  if (nodes == doc.end() || !nodes->is_array()) {
    return Status::Corrupt("graph JSON: \"nodes\" must be an array");
  }
  Graph graph;
  if (auto d = doc.find("description"); d != doc.end() && d->is_string()) {
    graph.description = d->get<std::string>();
  }
  for (size_t i = 0; i < nodes->size(); ++i) {
    const json& item = (*nodes)[i];
    if (!item.is_object())
      return Status::Corrupt(fmt::format("graph JSON: node {} is not an object", i));
    Node node;
    auto op = item.find("op");
    if (op == item.end() || !op->is_string()) {
      return Status::Corrupt(fmt::format("graph JSON: node {} has no string \"op\"", i));
    }
    Result<OpKind> kind = parse_op(op->get<std::string>());
    if (!kind.ok())
      return Status::Corrupt(fmt::format("graph JSON: node {}: {}", i, kind.status().message()));
    node.op = *kind;
    Status s = read_unsigned(item, "file", i, node.file, false);
    if (s.ok()) s = read_unsigned(item, "offset", i, node.offset, false);
    if (s.ok()) s = read_unsigned(item, "length", i, node.length, false);
    if (s.ok()) s = read_unsigned(item, "buffer", i, node.buffer, false);
    if (!s.ok()) return s;
    if ((node.op == OpKind::kRead || node.op == OpKind::kWrite) && node.length == 0) {
      return Status::Corrupt(
          fmt::format("graph JSON: node {} is a {} of length 0", i, op_name(node.op)));
    }
    graph.add_node(node);
  }
  auto edges = doc.find("edges");
  if (edges != doc.end()) {
    if (!edges->is_array()) return Status::Corrupt("graph JSON: \"edges\" must be an array");
    for (size_t e = 0; e < edges->size(); ++e) {
      const json& pair = (*edges)[e];
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() ||
          !pair[1].is_number_unsigned()) {
        return Status::Corrupt(
            fmt::format("graph JSON: edge {} must be [from, to] with non-negative ids", e));
      }
      uint64_t from = pair[0].get<uint64_t>(), to = pair[1].get<uint64_t>();
      if (from > UINT32_MAX || to > UINT32_MAX) {
        return Status::Invalid(fmt::format("bad edge {} -> {}: node does not exist", from, to));
      }
      if (Status s = graph.add_edge(static_cast<uint32_t>(from), static_cast<uint32_t>(to));
          !s.ok()) {
        return s;
      }
    }
  }
  if (Status s = graph.finalize(); !s.ok()) return s;
  return graph;
}

Status save_graph(const Graph& graph, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Status::FromErrno("cannot write " + path, errno);
  out << graph_to_json(graph);
  out.close();
  if (!out) return Status::FromErrno("cannot write " + path, errno);
  return Status::Ok();
}

Result<Graph> load_graph(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("{}: no such file", path));
    return Status::FromErrno("cannot read " + path, err);
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::FromErrno("cannot read " + path, errno);
  Result<Graph> graph = graph_from_json(buffer.str());
  if (!graph.ok()) return Status(graph.status().code(), path + ": " + graph.status().message());
  return graph;
}

}  // namespace iograph
