// The answers to the fleet's commands (protocol.hpp's Command, on nanotrace.F.ctl), each node
// answering for itself: arm and disarm (ProcessesAnswer), resume (ResumeAnswer), snapshot
// (SnapshotAnswer: the round's manifest), rounds (RoundsAnswer: the manifests of its spool) and
// status (message_status.hpp). Every answer is an object with the answering node's name; one
// with an "error" says the node refused or failed the command and carries nothing else.
// docs/fleet.md, "Messages", is each one's schema.
//
// A collector reads them with read_answer(), which never throws and, for an answer it cannot
// read, still says which node sent it when the bytes name one.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "fleet/message_manifest.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

class FieldReader;

// One process's result of an arm or disarm.
struct ProcessResult {
  uint32_t pid = 0;
  std::string name;   // arm only
  std::string error;  // "" if done

  nlohmann::json json_value() const;
  void read(FieldReader& fields);
};

// arm, disarm: each traced process of the node.
struct ProcessesAnswer {
  static constexpr const char* kWhat = "arm or disarm answer";
  std::string node;
  std::string error;
  std::vector<ProcessResult> processes;

  std::string to_json() const;
  nlohmann::json json_value() const;
  void read(FieldReader& fields);
  static Result<ProcessesAnswer> parse(const std::string& json);
};

// resume: what could not be resumed.
struct ResumeAnswer {
  static constexpr const char* kWhat = "resume answer";
  std::string node;
  std::string error;
  std::vector<std::string> errors;

  std::string to_json() const;
  nlohmann::json json_value() const;
  void read(FieldReader& fields);
  static Result<ResumeAnswer> parse(const std::string& json);
};

// snapshot: the round's manifest on this node.
struct SnapshotAnswer {
  static constexpr const char* kWhat = "snapshot answer";
  std::string node;
  std::string error;
  Manifest manifest;

  std::string to_json() const;
  nlohmann::json json_value() const;
  void read(FieldReader& fields);
  static Result<SnapshotAnswer> parse(const std::string& json);
};

// rounds: the manifests of the node's spool (its latest 64).
struct RoundsAnswer {
  static constexpr const char* kWhat = "rounds answer";
  std::string node;
  std::string error;
  std::vector<Manifest> rounds;

  std::string to_json() const;
  nlohmann::json json_value() const;
  void read(FieldReader& fields);
  static Result<RoundsAnswer> parse(const std::string& json);
};

// An answer saying only that node refused or failed the command, whatever it was.
std::string error_answer(const std::string& node, const std::string& error);
nlohmann::json error_answer_json(const std::string& node, const std::string& error);
// Reads what every answer begins with; false if it is an error answer (the rest is absent)
// or the head is malformed.
bool read_answer_head(FieldReader& fields, std::string* node, std::string* error);

// A collector's reading of one answer (T: one of the answers above, or StatusAnswer).
template <class T>
struct ReadAnswer {
  // The node the answer names, even when it cannot be read otherwise (a name that is not a
  // node name is kept as sent, printable: the error line must say who sent it); "" if none.
  std::string node;
  Result<T> answer = Status::Corrupt("no answer");
};
template <class T>
ReadAnswer<T> read_answer(const std::string& bytes);
// parse() of the answer types: the answer, or kCorrupt "<what>: <first failure>".
template <class T>
Result<T> parse_answer(const std::string& bytes, const char* what);

}  // namespace nanotrace::fleet
