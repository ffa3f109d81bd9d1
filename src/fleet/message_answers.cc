// The answers to the fleet's commands (message_answers.hpp).
#include "fleet/message_answers.hpp"

#include <nlohmann/json.hpp>
#include <string_view>

#include "fleet/message_fields.hpp"
#include "fleet/message_status.hpp"
#include "fleet/message_top.hpp"

namespace nanotrace::fleet {

using nlohmann::json;
using Need = FieldReader::Need;

json error_answer_json(const std::string& node, const std::string& error) {
  return {{"node", node}, {"error", error}};
}

std::string error_answer(const std::string& node, const std::string& error) {
  return json_text(error_answer_json(node, error));
}

bool read_answer_head(FieldReader& r, std::string* node, std::string* error) {
  r.name("node", node);
  r.text("error", error, kMaxTextBytes, Need::kOptional);
  return r.ok() && error->empty();
}

template <class T>
Result<T> parse_answer(const std::string& bytes, const char* what) {
  auto j = parse_message_object(bytes);
  if (!j.ok()) return Status::Corrupt(std::string(what) + ": " + j.status().message());
  T answer;
  FieldReader r(*j);
  answer.read(r);
  if (!r.ok()) return r.status(what);
  return answer;
}

json ProcessResult::json_value() const {
  json j = {{"pid", pid}};
  if (!name.empty()) j["name"] = name;
  if (!error.empty()) j["error"] = error;
  return j;
}

void ProcessResult::read(FieldReader& r) {
  r.u32("pid", &pid);
  r.text("name", &name, kMaxNameBytes, Need::kOptional);
  r.text("error", &error, kMaxTextBytes, Need::kOptional);
}

json ProcessesAnswer::json_value() const {
  if (!error.empty()) return error_answer_json(node, error);
  json list = json::array();
  for (const ProcessResult& p : processes) list.push_back(p.json_value());
  return {{"node", node}, {"processes", std::move(list)}};
}

std::string ProcessesAnswer::to_json() const { return json_text(json_value()); }

void ProcessesAnswer::read(FieldReader& r) {
  if (read_answer_head(r, &node, &error)) r.objects("processes", &processes);
}

Result<ProcessesAnswer> ProcessesAnswer::parse(const std::string& bytes) {
  return parse_answer<ProcessesAnswer>(bytes, kWhat);
}

json ResumeAnswer::json_value() const {
  if (!error.empty()) return error_answer_json(node, error);
  return {{"node", node}, {"errors", errors}};
}

std::string ResumeAnswer::to_json() const { return json_text(json_value()); }

void ResumeAnswer::read(FieldReader& r) {
  if (read_answer_head(r, &node, &error)) r.texts("errors", &errors, kMaxTextBytes);
}

Result<ResumeAnswer> ResumeAnswer::parse(const std::string& bytes) {
  return parse_answer<ResumeAnswer>(bytes, kWhat);
}

json SnapshotAnswer::json_value() const {
  if (!error.empty()) return error_answer_json(node, error);
  json j = manifest.json_value();
  j["node"] = node;
  return j;
}

std::string SnapshotAnswer::to_json() const { return json_text(json_value()); }

void SnapshotAnswer::read(FieldReader& r) {
  if (read_answer_head(r, &node, &error)) manifest.read(r);
}

Result<SnapshotAnswer> SnapshotAnswer::parse(const std::string& bytes) {
  return parse_answer<SnapshotAnswer>(bytes, kWhat);
}

json RoundsAnswer::json_value() const {
  if (!error.empty()) return error_answer_json(node, error);
  json list = json::array();
  for (const Manifest& m : rounds) list.push_back(m.json_value());
  return {{"node", node}, {"rounds", std::move(list)}};
}

std::string RoundsAnswer::to_json() const { return json_text(json_value()); }

void RoundsAnswer::read(FieldReader& r) {
  if (read_answer_head(r, &node, &error)) r.objects("rounds", &rounds);
}

Result<RoundsAnswer> RoundsAnswer::parse(const std::string& bytes) {
  return parse_answer<RoundsAnswer>(bytes, kWhat);
}

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// The node named in bytes that are not a readable JSON object: the first "node":"NAME" with
// NAME a node name, as an agent writes it; "" if none. A sender can claim any name in a
// readable answer too, so this names no one it could not.
std::string node_in_bytes(std::string_view bytes) {
  constexpr std::string_view kKey = "\"node\"";
  for (size_t at = bytes.find(kKey); at != std::string_view::npos; at = bytes.find(kKey, at + 1)) {
    size_t i = at + kKey.size();
    auto skip_spaces = [&] {
      while (i < bytes.size() && (bytes[i] == ' ' || bytes[i] == '\t' || bytes[i] == '\n')) ++i;
    };
    skip_spaces();
    if (i >= bytes.size() || bytes[i] != ':') continue;
    ++i;
    skip_spaces();
    if (i >= bytes.size() || bytes[i] != '"') continue;
    const size_t start = ++i;
    while (i < bytes.size() && i - start <= 64 && name_char(bytes[i])) ++i;
    if (i < bytes.size() && bytes[i] == '"' && i > start && i - start <= 64) {
      return std::string(bytes.substr(start, i - start));
    }
  }
  return "";
}

// The node an answer names, printable whatever it is (a name that is not a node name kept,
// escaped, at most 64 bytes of it).
std::string claimed_node(const json& answer) {
  auto it = answer.find("node");
  if (it == answer.end()) return "";
  if (!it->is_string()) {
    std::string type = "(";  // not one expression: g++ 12 warns on it (-Wrestrict)
    type += it->type_name();
    return type + ")";
  }
  return printable(it->get_ref<const std::string&>(), 64);
}

}  // namespace

template <class T>
ReadAnswer<T> read_answer(const std::string& bytes) {
  ReadAnswer<T> out;
  auto j = parse_message_object(bytes);
  if (!j.ok()) {
    out.node = node_in_bytes(bytes);
    out.answer = Status::Corrupt(std::string(T::kWhat) + ": " + j.status().message() + " (" +
                                 std::to_string(bytes.size()) + " bytes)");
    return out;
  }
  out.node = claimed_node(*j);
  T answer;
  FieldReader r(*j);
  answer.read(r);
  if (!r.ok()) {
    out.answer = r.status(T::kWhat);
  } else {
    out.answer = std::move(answer);
  }
  return out;
}

template ReadAnswer<ProcessesAnswer> read_answer<ProcessesAnswer>(const std::string&);
template ReadAnswer<ResumeAnswer> read_answer<ResumeAnswer>(const std::string&);
template ReadAnswer<SnapshotAnswer> read_answer<SnapshotAnswer>(const std::string&);
template ReadAnswer<RoundsAnswer> read_answer<RoundsAnswer>(const std::string&);
template ReadAnswer<StatusAnswer> read_answer<StatusAnswer>(const std::string&);
template ReadAnswer<TopAnswer> read_answer<TopAnswer>(const std::string&);
template Result<TopAnswer> parse_answer<TopAnswer>(const std::string&, const char*);
template Result<StatusAnswer> parse_answer<StatusAnswer>(const std::string&, const char*);

}  // namespace nanotrace::fleet
