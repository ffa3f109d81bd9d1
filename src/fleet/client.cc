// The fleet's commands and collection (client.hpp).
#include "fleet/client.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "fleet/protocol.hpp"
#include "fleet/spool.hpp"

namespace nanotrace::fleet {

using nlohmann::json;

Result<std::unique_ptr<FleetClient>> FleetClient::connect(const ClientOptions& options) {
  if (!valid_name(options.fleet)) return Status::Invalid("bad fleet name '" + options.fleet + "'");
  auto broker = Broker::connect(options.broker);
  if (!broker.ok()) return broker.status();
  return std::unique_ptr<FleetClient>(new FleetClient(options, std::move(*broker)));
}

Result<std::vector<json>> FleetClient::command(const std::string& body) {
  auto answers =
      broker_->gather(ctl_subject(options_.fleet), body, options_.nodes, options_.timeout_ms);
  if (!answers.ok()) return answers.status();
  std::vector<json> out;
  for (const std::string& a : *answers) {
    json j = json::parse(a, nullptr, false);
    if (j.is_object() && j.contains("node") && j["node"].is_string()) out.push_back(std::move(j));
  }
  std::sort(out.begin(), out.end(), [](const json& a, const json& b) {
    return a["node"].get<std::string>() < b["node"].get<std::string>();
  });
  return out;
}

namespace {

bool names_round(const json& manifest, const std::string& round) {
  if (manifest.value("round", "") == round) return true;
  if (!manifest.contains("origins") || !manifest["origins"].is_array()) return false;
  for (const json& o : manifest["origins"]) {
    if (o.is_object() && o.value("round", "") == round) return true;
  }
  return false;
}

}  // namespace

Status FleetClient::fetch_file(const std::string& node, const std::string& file, int dir_fd,
                               const std::string& local_name, uint64_t* bytes, uint64_t* wire) {
  if (!valid_name(node)) return Status::Invalid("bad node name '" + node + "'");
  int fd = openat(dir_fd, local_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0600);
  if (fd < 0) return Status::IoError("cannot create " + local_name + ": " + std::strerror(errno));
  uint64_t offset = 0;
  Status result = Status::Ok();
  for (;;) {
    FetchRequest r{file, offset, kFetchChunk, options_.zstd};
    auto answer = broker_->request(fetch_subject(options_.fleet, node), r.to_json(), 10000);
    if (!answer.ok()) {
      result = answer.status();
      break;
    }
    auto data = fetch_answer_bytes(*answer);
    if (!data.ok()) {
      result = Status(data.status().code(), node + ": " + data.status().message());
      break;
    }
    if (wire != nullptr) *wire += answer->size();
    size_t n = data->size();
    if (n > 0 &&
        pwrite(fd, data->data(), n, static_cast<off_t>(offset)) != static_cast<ssize_t>(n)) {
      result = Status::IoError("cannot write " + file + ": " + std::strerror(errno));
      break;
    }
    offset += n;
    if (n < kFetchChunk) break;
  }
  ::close(fd);
  if (!result.ok()) unlinkat(dir_fd, local_name.c_str(), 0);
  *bytes += offset;
  return result;
}

Result<uint64_t> FleetClient::fetch(const std::string& node, const std::string& file,
                                    const std::string& output) {
  size_t slash = output.rfind('/');
  std::string dir = slash == std::string::npos ? "." : output.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? output : output.substr(slash + 1);
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Status::IoError("cannot open " + dir + ": " + std::strerror(errno));
  uint64_t bytes = 0;
  Status s = fetch_file(node, file, dir_fd, name, &bytes);
  ::close(dir_fd);
  if (!s.ok()) return s;
  return bytes;
}

FleetClient::NodeCopy FleetClient::copy_node(const std::string& node, const json& manifest,
                                             int dir_fd) {
  NodeCopy copy;
  std::string manifest_name = manifest.value("round", "") + "." + node + ".json";
  Status s =
      valid_spool_name(manifest_name)
          ? fetch_file(node, manifest_name, dir_fd, manifest_name, &copy.bytes, &copy.wire_bytes)
          : Status::Invalid("bad round name");
  if (!s.ok()) copy.errors.push_back(node + ": " + s.message());
  for (const json& p : manifest.value("processes", json::array())) {
    std::string file = p.value("file", "");
    if (file.empty() || p.contains("error")) continue;
    if (!valid_spool_name(file)) {
      copy.errors.push_back(node + ": refused file name '" + file + "'");
      continue;
    }
    Status f = fetch_file(node, file, dir_fd, file, &copy.bytes, &copy.wire_bytes);
    if (!f.ok()) {
      copy.errors.push_back(node + ": " + f.message());
    } else {
      ++copy.files;
    }
  }
  return copy;
}

namespace {

// The newest fleet round (a match's, not a node's local one) the answers list; "" if none.
std::string newest_round(const std::vector<json>& answers) {
  std::string round;
  uint64_t newest = 0;
  for (const json& a : answers) {
    for (const json& m : a.value("rounds", json::array())) {
      uint64_t t = 0;
      if (m.contains("origins") && m["origins"].is_array() && !m["origins"].empty()) {
        t = m["origins"][0].value("match_realtime_ns", uint64_t{0});
      }
      if (t >= newest && m.value("round", "").find("-local") == std::string::npos) {
        newest = t;
        round = m.value("round", "");
      }
    }
  }
  return round;
}

// Each node's manifest of round among the answers.
std::map<std::string, json> holders(const std::vector<json>& answers, const std::string& round) {
  std::map<std::string, json> holding;
  for (const json& a : answers) {
    for (const json& m : a.value("rounds", json::array())) {
      if (names_round(m, round)) holding[a["node"].get<std::string>()] = m;
    }
  }
  return holding;
}

}  // namespace

Result<CollectResult> FleetClient::collect(const std::string& round, const std::string& dir,
                                           int wait_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  CollectResult result;
  result.round = round;
  std::map<std::string, json> holding;  // node -> its manifest of the round
  for (;;) {
    // Every node's answer, not the first --nodes: the round asked may be on any of them.
    auto raw = broker_->gather(ctl_subject(options_.fleet), R"({"op":"rounds"})", 0,
                               std::min(options_.timeout_ms, 300));
    if (!raw.ok()) return raw.status();
    std::vector<json> answers;
    for (const std::string& a : *raw) {
      json j = json::parse(a, nullptr, false);
      if (j.is_object() && j.contains("node") && j["node"].is_string()) answers.push_back(j);
    }
    // The latest round, if none was named (kept if no node answers with one this time).
    if (round.empty()) {
      std::string newest = newest_round(answers);
      if (!newest.empty()) result.round = newest;
    }
    holding = result.round.empty() ? std::map<std::string, json>{} : holders(answers, result.round);
    bool enough = !result.round.empty() &&
                  (options_.nodes == 0 ? !holding.empty() : holding.size() >= options_.nodes);
    if (enough || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (result.round.empty()) return Status::NotFound("no node holds a round");
  if (holding.empty()) return Status::NotFound("no node holds round " + result.round);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError("cannot create " + dir + ": " + std::strerror(errno));
  }
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Status::IoError("cannot open " + dir + ": " + std::strerror(errno));
  copy_holders(holding, dir_fd, &result);
  ::close(dir_fd);
  if (options_.nodes != 0 && holding.size() < options_.nodes) {
    result.errors.push_back("only " + std::to_string(holding.size()) + " of " +
                            std::to_string(options_.nodes) + " nodes hold round " + result.round);
  }
  return result;
}

void FleetClient::copy_holders(const std::map<std::string, json>& holding, int dir_fd,
                               CollectResult* result) {
  auto copy_start = std::chrono::steady_clock::now();
  // Up to `parallel` nodes at once, each one request at a time; the results in node order.
  std::vector<const std::pair<const std::string, json>*> nodes;
  for (const auto& entry : holding) nodes.push_back(&entry);
  std::vector<NodeCopy> copies(nodes.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < nodes.size();) {
      copies[i] = copy_node(nodes[i]->first, nodes[i]->second, dir_fd);
    }
  };
  std::vector<std::thread> workers;
  const size_t threads = std::clamp<size_t>(options_.parallel, 1, nodes.size());
  for (size_t t = 1; t < threads; ++t) workers.emplace_back(worker);
  worker();
  for (std::thread& t : workers) t.join();
  for (NodeCopy& c : copies) {
    ++result->nodes;
    result->files += c.files;
    result->bytes += c.bytes;
    result->wire_bytes += c.wire_bytes;
    for (std::string& e : c.errors) result->errors.push_back(std::move(e));
  }
  result->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
}

}  // namespace nanotrace::fleet
