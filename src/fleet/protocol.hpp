// The fleet's messages over the broker: subjects, the requests (a command, a freeze, a fetch)
// and a fetch's answer; the answers to commands are in message_answers.hpp, message_status.hpp
// and message_manifest.hpp. docs/fleet.md, "Messages", is each one's schema. Every message is
// untrusted: parse() checks types and sizes (message_fields.hpp) and never throws, and a
// message that fails is answered with an error (or dropped when nobody waits for an answer),
// never acted on.
//
// Subjects, for a fleet named F (one broker may carry several fleets):
//   nanotrace.F.ctl           a command to every agent (Command), answered by each
//   nanotrace.F.freeze        "freeze now": a node's trigger fired (Freeze), to every agent
//   nanotrace.F.fetch.NODE    a chunk of a file in NODE's spool (FetchRequest); the answer is
//                             'D' + bytes, 'Z' + one zstd frame of them (asked for, and
//                             smaller), or 'E' + an error message
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

class FieldReader;

std::string ctl_subject(const std::string& fleet);
std::string freeze_subject(const std::string& fleet);
std::string fetch_subject(const std::string& fleet, const std::string& node);
// True if text may be a fleet or node name (it becomes a subject token and part of file names).
bool valid_name(const std::string& text);

constexpr uint64_t kFetchChunk = 512 * 1024;  // under nats-server's 1 MiB max_payload

// What froze a round: the record that matched (origin node, process, thread, record), or a
// request (`fleet snapshot`: event empty, pid 0).
struct Freeze {
  std::string round;  // the round's id: unique per fleet
  std::string node;   // origin
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t seq = 0;                // the matching record's number in its thread
  std::string event;               // "group:name"
  std::string expression;          // the trigger's expression
  uint64_t match_realtime_ns = 0;  // CLOCK_REALTIME of the matching record (or the request)
  uint64_t after_ns = 0;           // the window after it every node keeps (0: freeze on arrival)

  std::string to_json() const;
  nlohmann::json json_value() const;
  static Result<Freeze> parse(const std::string& json);
  void read(FieldReader& fields);  // as an entry of a manifest's origins
};

// A command on nanotrace.F.ctl.
struct Command {
  enum class Op { kArm, kDisarm, kSnapshot, kStatus, kRounds, kResume, kTop };
  Op op = Op::kStatus;
  std::string expression;  // arm
  std::string after;       // arm: "N" events or a duration ("500us")
  uint64_t before_ns = 0;  // arm: the history asked before the match
  uint64_t rate_ns = 0;    // arm: at most one fleet freeze per this interval (0: keep)
  std::string round;       // snapshot: the round's id
  std::string to_json() const;
  static Result<Command> parse(const std::string& json);
};

struct FetchRequest {
  std::string file;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool zstd = false;  // the answer may be compressed (an agent that predates it ignores it)
  std::string to_json() const;
  static Result<FetchRequest> parse(const std::string& json);
};

// A fetch's answer carrying `bytes`: 'Z' + a zstd frame when zstd is asked and it is smaller,
// else 'D' + the bytes.
std::string fetch_answer(const std::string& bytes, bool zstd);
// The bytes an answer carries (an untrusted message: a frame must decompress, whole, to at
// most kFetchChunk bytes). Errors: kIoError with the agent's message ('E'), kCorrupt.
Result<std::string> fetch_answer_bytes(const std::string& answer);

// A new round id: the freeze's wall-clock time and its origin ("20261203T121501.123456-node3").
std::string new_round_id(uint64_t realtime_ns, const std::string& node);

}  // namespace nanotrace::fleet
