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

#include "fleet/message_fields.hpp"
#include "fleet/message_top.hpp"
#include "fleet/protocol.hpp"
#include "fleet/spool.hpp"

namespace nanotrace::fleet {

Result<std::unique_ptr<FleetClient>> FleetClient::connect(const ClientOptions& options) {
  if (!valid_name(options.fleet)) return Status::Invalid("bad fleet name '" + options.fleet + "'");
  auto broker = Broker::connect(options.broker);
  if (!broker.ok()) return broker.status();
  return std::unique_ptr<FleetClient>(new FleetClient(options, std::move(*broker)));
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string nodes_text(size_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

}  // namespace

std::string UnreadableAnswer::line() const {
  return (node.empty() ? std::string("an answer naming no node") : "node " + node) + ": " + reason;
}

bool FleetClient::enough(const std::set<std::string>& readable) const {
  if (!options_.node_names.empty()) {
    return std::all_of(options_.node_names.begin(), options_.node_names.end(),
                       [&](const std::string& n) { return readable.count(n) != 0; });
  }
  return options_.nodes != 0 && readable.size() >= options_.nodes;
}

std::string FleetClient::shortfall(const std::set<std::string>& answered) const {
  if (!options_.node_names.empty()) {
    std::vector<std::string> missing;
    for (const std::string& n : options_.node_names) {
      if (answered.count(n) == 0) missing.push_back(n);
    }
    if (missing.empty()) return "";
    return std::to_string(options_.node_names.size() - missing.size()) + " of " +
           nodes_text(options_.node_names.size()) + " answered; no answer from " + joined(missing);
  }
  if (options_.nodes == 0 || answered.size() >= options_.nodes) return "";
  std::vector<std::string> names(answered.begin(), answered.end());
  return std::to_string(answered.size()) + " of " + nodes_text(options_.nodes) + " answered" +
         (names.empty() ? "" : " (" + joined(names) + ")") +
         "; --nodes NAME,... names the nodes expected, and then the missing ones";
}

template <class T>
Result<Answers<T>> FleetClient::ask(const Command& command) {
  Answers<T> out;
  std::set<std::string> readable;  // nodes with a readable answer in out.answers
  Status s = broker_->gather_each(
      ctl_subject(options_.fleet), command.to_json(), options_.timeout_ms,
      [&](std::string&& bytes) {
        ReadAnswer<T> read = read_answer<T>(bytes);
        if (!read.node.empty()) out.answered.insert(read.node);
        if (!read.answer.ok()) {
          out.unreadable.push_back({read.node, "malformed " + read.answer.status().message()});
        } else if (!readable.insert(read.node).second) {
          // Two members claim one name: the first answer is shown, the other named.
          out.unreadable.push_back({read.node, "a second answer from this node name (ignored)"});
        } else {
          out.answers.push_back(std::move(*read.answer));
        }
        // Readable answers only: an unreadable one claiming a node must not end the wait for
        // that node's own.
        return enough(readable);
      });
  if (!s.ok()) return s;
  std::sort(out.answers.begin(), out.answers.end(),
            [](const T& a, const T& b) { return a.node < b.node; });
  std::stable_sort(
      out.unreadable.begin(), out.unreadable.end(),
      [](const UnreadableAnswer& a, const UnreadableAnswer& b) { return a.node < b.node; });
  out.shortfall = shortfall(out.answered);
  return out;
}

template Result<Answers<ProcessesAnswer>> FleetClient::ask<ProcessesAnswer>(const Command&);
template Result<Answers<ResumeAnswer>> FleetClient::ask<ResumeAnswer>(const Command&);
template Result<Answers<SnapshotAnswer>> FleetClient::ask<SnapshotAnswer>(const Command&);
template Result<Answers<RoundsAnswer>> FleetClient::ask<RoundsAnswer>(const Command&);
template Result<Answers<StatusAnswer>> FleetClient::ask<StatusAnswer>(const Command&);
template Result<Answers<TopAnswer>> FleetClient::ask<TopAnswer>(const Command&);

Status FleetClient::fetch_file(const std::string& node, const std::string& file, int dir_fd,
                               const std::string& local_name, uint64_t limit, uint64_t* bytes,
                               uint64_t* wire) {
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
      result = Status(data.status().code(), file + ": " + data.status().message());
      break;
    }
    if (wire != nullptr) *wire += answer->size();
    size_t n = data->size();
    // The node's answer is untrusted: no more than asked, and no more than the file it said
    // it has.
    if (n > kFetchChunk || offset + n > limit) {
      result = Status::Corrupt(file + ": the node sent more than " +
                               (n > kFetchChunk ? "asked" : std::to_string(limit) + " bytes"));
      break;
    }
    if (n > 0 &&
        pwrite(fd, data->data(), n, static_cast<off_t>(offset)) != static_cast<ssize_t>(n)) {
      result = Status::IoError("cannot write " + local_name + ": " + std::strerror(errno));
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
  Status s = fetch_file(node, file, dir_fd, name, UINT64_MAX, &bytes);
  ::close(dir_fd);
  if (!s.ok()) return Status(s.code(), "node " + node + ": " + s.message());
  return bytes;
}

FleetClient::NodeCopy FleetClient::copy_node(const std::string& node, const Manifest& manifest,
                                             int dir_fd) {
  NodeCopy copy;
  // The manifest's names were checked when its answer was read (spool file names only).
  const std::string manifest_name = manifest.round + "." + node + ".json";
  Status s = valid_spool_name(manifest_name)
                 ? fetch_file(node, manifest_name, dir_fd, manifest_name, kMaxMessageBytes,
                              &copy.bytes, &copy.wire_bytes)
                 : Status::Invalid("bad round name");
  if (!s.ok()) copy.errors.push_back("node " + node + ": " + s.message());
  for (const ManifestProcess& p : manifest.processes) {
    if (!p.copied()) continue;
    Status f = fetch_file(node, p.file, dir_fd, p.file, p.bytes != 0 ? p.bytes : UINT64_MAX,
                          &copy.bytes, &copy.wire_bytes);
    if (!f.ok()) {
      copy.errors.push_back("node " + node + ": " + f.message());
    } else {
      ++copy.files;
    }
  }
  return copy;
}

namespace {

// The newest fleet round (a match's, not a node's local one) the answers list; "" if none.
std::string newest_round(const std::vector<RoundsAnswer>& answers) {
  std::string round;
  uint64_t newest = 0;
  for (const RoundsAnswer& a : answers) {
    for (const Manifest& m : a.rounds) {
      const uint64_t t = m.match_realtime_ns();
      if (t >= newest && m.round.find("-local") == std::string::npos) {
        newest = t;
        round = m.round;
      }
    }
  }
  return round;
}

}  // namespace

// What collect's polls of `rounds` found, accumulated: a node whose answer a later poll missed
// (a slow node on a busy machine) still counts for what it said.
struct FleetClient::RoundsSeen {
  std::map<std::string, Manifest> holding;  // node -> its manifest of the round
  std::set<std::string> readable;           // nodes whose answer was read
  std::set<std::string> answered;           // nodes named by an answer, readable or not
  // Per node ("": none named), the lines of the latest poll that had any for it.
  std::map<std::string, std::vector<UnreadableAnswer>> unreadable;

  void add(Answers<RoundsAnswer>&& answers, const std::string& round) {
    std::map<std::string, std::vector<UnreadableAnswer>> latest;
    for (UnreadableAnswer& u : answers.unreadable) latest[u.node].push_back(std::move(u));
    for (auto& [node, lines] : latest) unreadable[node] = std::move(lines);
    answered.insert(answers.answered.begin(), answers.answered.end());
    for (const RoundsAnswer& a : answers.answers) {
      readable.insert(a.node);
      for (const Manifest& m : a.rounds) {
        if (!round.empty() && m.names_round(round)) holding[a.node] = m;
      }
    }
  }
  std::vector<std::string> unreadable_lines() const {
    std::vector<std::string> lines;
    for (const auto& entry : unreadable) {
      for (const UnreadableAnswer& u : entry.second) lines.push_back(u.line());
    }
    return lines;
  }
};

bool FleetClient::holders_enough(const RoundsSeen& seen) const {
  if (!options_.node_names.empty()) {
    return std::all_of(options_.node_names.begin(), options_.node_names.end(),
                       [&](const std::string& n) { return seen.holding.count(n) != 0; });
  }
  return options_.nodes == 0 ? !seen.holding.empty() : seen.holding.size() >= options_.nodes;
}

std::string FleetClient::holders_shortfall(const std::string& round, const RoundsSeen& seen) const {
  if (holders_enough(seen)) return "";
  // The nodes that should hold it and do not: the named ones, or every other that answered.
  std::vector<std::string> missing;
  if (!options_.node_names.empty()) {
    for (const std::string& n : options_.node_names) {
      if (seen.holding.count(n) == 0) missing.push_back(n);
    }
  } else {
    for (const std::string& n : seen.answered) {
      if (seen.holding.count(n) == 0) missing.push_back(n);
    }
  }
  std::vector<std::string> without, unreadable, silent;
  for (const std::string& n : missing) {
    if (seen.readable.count(n) != 0) {
      without.push_back(n);
    } else if (seen.answered.count(n) != 0) {
      unreadable.push_back(n);
    } else {
      silent.push_back(n);
    }
  }
  const size_t wanted = options_.node_names.empty() ? options_.nodes : options_.node_names.size();
  const size_t held = options_.node_names.empty() ? seen.holding.size() : wanted - missing.size();
  std::vector<std::string> parts;
  if (!without.empty()) parts.push_back(joined(without) + " answered without it");
  if (!unreadable.empty()) parts.push_back("unreadable answer from " + joined(unreadable));
  if (!silent.empty()) parts.push_back("no answer from " + joined(silent));
  const size_t named = held + without.size() + unreadable.size();
  if (options_.node_names.empty() && named < wanted) {
    parts.push_back(std::to_string(wanted - named) +
                    " more did not answer (--nodes NAME,... names the nodes expected)");
  }
  std::string text =
      "only " + std::to_string(held) + " of " + nodes_text(wanted) + " hold round " + round;
  for (size_t i = 0; i < parts.size(); ++i) text += (i == 0 ? ": " : "; ") + parts[i];
  return text;
}

Result<CollectResult> FleetClient::collect(const std::string& round, const std::string& dir,
                                           int wait_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  CollectResult result;
  result.round = round;
  RoundsSeen seen;
  Command rounds;
  rounds.op = Command::Op::kRounds;
  for (;;) {
    // Every node's answer, not the first --nodes: the round asked may be on any of them.
    ClientOptions everyone = options_;
    everyone.nodes = 0;
    everyone.node_names.clear();
    everyone.timeout_ms = std::min(options_.timeout_ms, 300);
    std::swap(options_, everyone);
    auto asked = ask<RoundsAnswer>(rounds);
    std::swap(options_, everyone);
    if (!asked.ok()) return asked.status();
    // The latest round, if none was named (kept if no node answers with one this time; a newer
    // one replaces it, and who holds it is looked for again).
    if (round.empty()) {
      std::string newest = newest_round(asked->answers);
      if (!newest.empty() && newest != result.round) {
        result.round = newest;
        seen.holding.clear();
      }
    }
    seen.add(std::move(*asked), result.round);
    bool enough = !result.round.empty() && holders_enough(seen);
    if (enough || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // What could not be read is named once, whatever was found.
  result.errors = seen.unreadable_lines();
  auto not_found = [&](const std::string& what) {
    std::string text = what;
    for (const std::string& line : result.errors) text += "; " + line;
    return Status::NotFound(text);
  };
  if (result.round.empty()) return not_found("no node holds a round");
  if (seen.holding.empty()) return not_found("no node holds round " + result.round);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError("cannot create " + dir + ": " + std::strerror(errno));
  }
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Status::IoError("cannot open " + dir + ": " + std::strerror(errno));
  copy_holders(seen.holding, dir_fd, &result);
  ::close(dir_fd);
  std::string shortfall = holders_shortfall(result.round, seen);
  if (!shortfall.empty()) result.errors.push_back(shortfall);
  return result;
}

void FleetClient::copy_holders(const std::map<std::string, Manifest>& holding, int dir_fd,
                               CollectResult* result) {
  auto copy_start = std::chrono::steady_clock::now();
  // Up to `parallel` nodes at once, each one request at a time; the results in node order.
  std::vector<const std::pair<const std::string, Manifest>*> nodes;
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
    if (c.errors.empty()) ++result->nodes;  // the others are named in the errors
    result->files += c.files;
    result->bytes += c.bytes;
    result->wire_bytes += c.wire_bytes;
    for (std::string& e : c.errors) result->errors.push_back(std::move(e));
  }
  result->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
}

}  // namespace nanotrace::fleet
