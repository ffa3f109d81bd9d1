// The fleet's messages (protocol.hpp): JSON through nlohmann-json, checked field by field.
#include "fleet/protocol.hpp"

#include <fmt/format.h>
#include <time.h>
#include <zstd.h>

#include <nlohmann/json.hpp>

#include "fleet/spool.hpp"

namespace nanotrace::fleet {

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

using nlohmann::json;

Result<json> parse_object(const std::string& text) {
  if (text.size() > 64 * 1024) return Status::Invalid("message too large");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Invalid("not a JSON object");
  return j;
}

bool get_string(const json& j, const char* key, std::string* out, size_t max = 256) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return out->size() <= max;
}

template <typename T>
bool get_uint(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_number_unsigned()) return false;
  *out = static_cast<T>(it->get<uint64_t>());
  return true;
}

}  // namespace

std::string ctl_subject(const std::string& fleet) { return "nanotrace." + fleet + ".ctl"; }
std::string freeze_subject(const std::string& fleet) { return "nanotrace." + fleet + ".freeze"; }
std::string fetch_subject(const std::string& fleet, const std::string& node) {
  return "nanotrace." + fleet + ".fetch." + node;
}

bool valid_name(const std::string& text) {
  return !text.empty() && text.size() <= 64 && spool_safe(text) == text;
}

std::string Freeze::to_json() const {
  return json_text(json{{"round", round},
                        {"node", node},
                        {"pid", pid},
                        {"tid", tid},
                        {"seq", seq},
                        {"event", event},
                        {"expression", expression},
                        {"match_realtime_ns", match_realtime_ns},
                        {"after_ns", after_ns}});
}

Result<Freeze> Freeze::parse(const std::string& text) {
  auto j = parse_object(text);
  if (!j.ok()) return j.status();
  Freeze f;
  if (!get_string(*j, "round", &f.round, 128) || !get_string(*j, "node", &f.node, 64) ||
      !get_uint(*j, "pid", &f.pid) || !get_uint(*j, "tid", &f.tid) ||
      !get_uint(*j, "seq", &f.seq) || !get_string(*j, "event", &f.event) ||
      !get_string(*j, "expression", &f.expression) ||
      !get_uint(*j, "match_realtime_ns", &f.match_realtime_ns) ||
      !get_uint(*j, "after_ns", &f.after_ns)) {
    return Status::Invalid("malformed freeze message");
  }
  if (!valid_spool_name(f.round) || !valid_name(f.node)) {
    return Status::Invalid("freeze message with a bad round or node name");
  }
  return f;
}

namespace {
const char* const kOps[] = {"arm", "disarm", "snapshot", "status", "rounds", "resume"};
}

std::string Command::to_json() const {
  json j{{"op", kOps[static_cast<int>(op)]}};
  if (op == Op::kArm) {
    j["expression"] = expression;
    j["after"] = after;
    j["before_ns"] = before_ns;
    j["rate_ns"] = rate_ns;
  }
  if (op == Op::kSnapshot) j["round"] = round;
  return json_text(j);
}

Result<Command> Command::parse(const std::string& text) {
  auto j = parse_object(text);
  if (!j.ok()) return j.status();
  Command c;
  std::string op;
  if (!get_string(*j, "op", &op, 16)) return Status::Invalid("malformed command");
  bool known = false;
  for (int i = 0; i < 6; ++i) {
    if (op == kOps[i]) {
      c.op = static_cast<Op>(i);
      known = true;
    }
  }
  if (!known) return Status::Invalid("unknown command '" + op.substr(0, 16) + "'");
  if (!get_string(*j, "expression", &c.expression, 255) || !get_string(*j, "after", &c.after, 32) ||
      !get_uint(*j, "before_ns", &c.before_ns) || !get_uint(*j, "rate_ns", &c.rate_ns) ||
      !get_string(*j, "round", &c.round, 128)) {
    return Status::Invalid("malformed " + op + " command");
  }
  if (c.op == Op::kSnapshot && !valid_spool_name(c.round)) {
    return Status::Invalid("refused: snapshot round '" + c.round + "' is not a spool file name");
  }
  return c;
}

std::string FetchRequest::to_json() const {
  json j{{"file", file}, {"offset", offset}, {"length", length}};
  if (zstd) j["zstd"] = true;
  return json_text(j);
}

Result<FetchRequest> FetchRequest::parse(const std::string& text) {
  auto j = parse_object(text);
  if (!j.ok()) return j.status();
  FetchRequest r;
  auto zstd = j->find("zstd");
  if (!get_string(*j, "file", &r.file, 1024) || !get_uint(*j, "offset", &r.offset) ||
      !get_uint(*j, "length", &r.length) || (zstd != j->end() && !zstd->is_boolean())) {
    return Status::Invalid("malformed fetch request");
  }
  r.zstd = zstd != j->end() && zstd->get<bool>();
  if (r.length == 0 || r.length > kFetchChunk) r.length = kFetchChunk;
  return r;
}

std::string fetch_answer(const std::string& bytes, bool zstd) {
  if (zstd && !bytes.empty()) {
    // Level 1: the node's CPU is the traced program's; the point is fewer bytes on the wire.
    std::string out(1 + ZSTD_compressBound(bytes.size()), '\0');
    out[0] = 'Z';
    size_t n = ZSTD_compress(out.data() + 1, out.size() - 1, bytes.data(), bytes.size(), 1);
    if (!ZSTD_isError(n) && n < bytes.size()) {
      out.resize(1 + n);
      return out;
    }
  }
  return "D" + bytes;
}

Result<std::string> fetch_answer_bytes(const std::string& answer) {
  if (answer.empty()) return Status::IoError("empty answer");
  if (answer[0] == 'D') return answer.substr(1);
  if (answer[0] == 'E') return Status::IoError(answer.substr(1));
  if (answer[0] != 'Z') return Status::Corrupt("unknown answer");
  const char* frame = answer.data() + 1;
  const size_t size = answer.size() - 1;
  const unsigned long long content = ZSTD_getFrameContentSize(frame, size);
  if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ||
      content > kFetchChunk || ZSTD_findFrameCompressedSize(frame, size) != size) {
    return Status::Corrupt("bad compressed chunk");
  }
  std::string out(static_cast<size_t>(content), '\0');
  size_t n = ZSTD_decompress(out.data(), out.size(), frame, size);
  if (ZSTD_isError(n) || n != out.size()) return Status::Corrupt("bad compressed chunk");
  return out;
}

std::string new_round_id(uint64_t realtime_ns, const std::string& node) {
  time_t seconds = static_cast<time_t>(realtime_ns / 1000000000);
  struct tm tm {};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}.{:06}-{}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (realtime_ns % 1000000000) / 1000, node);
}

}  // namespace nanotrace::fleet
