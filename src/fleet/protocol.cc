// The fleet's requests (protocol.hpp): JSON through nlohmann-json, read field by field without
// exceptions (message_fields.hpp).
#include "fleet/protocol.hpp"

#include <fmt/format.h>
#include <time.h>
#include <zstd.h>

#include <iterator>
#include <nlohmann/json.hpp>

#include "fleet/message_fields.hpp"
#include "fleet/spool.hpp"

namespace nanotrace::fleet {

namespace {

using nlohmann::json;

// The bounds of a freeze's and a command's fields.
constexpr size_t kMaxRoundBytes = 128;
constexpr size_t kMaxExpressionBytes = 255;

}  // namespace

std::string ctl_subject(const std::string& fleet) { return "nanotrace." + fleet + ".ctl"; }
std::string freeze_subject(const std::string& fleet) { return "nanotrace." + fleet + ".freeze"; }
std::string fetch_subject(const std::string& fleet, const std::string& node) {
  return "nanotrace." + fleet + ".fetch." + node;
}

bool valid_name(const std::string& text) {
  return !text.empty() && text.size() <= 64 && spool_safe(text) == text;
}

json Freeze::json_value() const {
  return json{{"round", round},
              {"node", node},
              {"pid", pid},
              {"tid", tid},
              {"seq", seq},
              {"event", event},
              {"expression", expression},
              {"match_realtime_ns", match_realtime_ns},
              {"after_ns", after_ns}};
}

std::string Freeze::to_json() const { return json_text(json_value()); }

void Freeze::read(FieldReader& r) {
  r.text("round", &round, kMaxRoundBytes);
  if (r.ok() && !valid_spool_name(round)) r.fail("round", "not a spool file name");
  r.name("node", &node);
  r.u32("pid", &pid, FieldReader::kOptional);
  r.u32("tid", &tid, FieldReader::kOptional);
  r.u64("seq", &seq, FieldReader::kOptional);
  r.text("event", &event, kMaxNameBytes, FieldReader::kOptional);
  r.text("expression", &expression, kMaxExpressionBytes, FieldReader::kOptional);
  r.u64("match_realtime_ns", &match_realtime_ns, FieldReader::kOptional);
  r.u64("after_ns", &after_ns, FieldReader::kOptional);
}

Result<Freeze> Freeze::parse(const std::string& text) {
  auto j = parse_message_object(text, 64 * 1024);
  if (!j.ok()) return Status::Invalid("freeze message: " + j.status().message());
  Freeze f;
  FieldReader r(*j);
  f.read(r);
  if (!r.ok()) return Status::Invalid("freeze message: " + r.error());
  return f;
}

namespace {
const char* const kOps[] = {"arm", "disarm", "snapshot", "status", "rounds", "resume", "top"};
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
  auto j = parse_message_object(text, 64 * 1024);
  if (!j.ok()) return Status::Invalid("command: " + j.status().message());
  Command c;
  FieldReader r(*j);
  std::string op;
  r.text("op", &op, 16);
  if (!r.ok()) return Status::Invalid("command: " + r.error());
  bool known = false;
  for (int i = 0; i < static_cast<int>(std::size(kOps)); ++i) {
    if (op == kOps[i]) {
      c.op = static_cast<Op>(i);
      known = true;
    }
  }
  if (!known) return Status::Invalid("unknown command '" + op + "'");
  r.text("expression", &c.expression, kMaxExpressionBytes, FieldReader::kOptional);
  r.text("after", &c.after, 32, FieldReader::kOptional);
  r.u64("before_ns", &c.before_ns, FieldReader::kOptional);
  r.u64("rate_ns", &c.rate_ns, FieldReader::kOptional);
  r.text("round", &c.round, kMaxRoundBytes, FieldReader::kOptional);
  if (!r.ok()) return Status::Invalid(op + " command: " + r.error());
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
  auto j = parse_message_object(text, 64 * 1024);
  if (!j.ok()) return Status::Invalid("fetch request: " + j.status().message());
  FetchRequest f;
  FieldReader r(*j);
  r.text("file", &f.file, 1024);
  r.u64("offset", &f.offset, FieldReader::kOptional);
  r.u64("length", &f.length, FieldReader::kOptional);
  r.boolean("zstd", &f.zstd, FieldReader::kOptional);
  if (!r.ok()) return Status::Invalid("fetch request: " + r.error());
  if (f.length == 0 || f.length > kFetchChunk) f.length = kFetchChunk;
  return f;
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
  if (answer[0] == 'E') return Status::IoError(printable(std::string_view(answer).substr(1)));
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
