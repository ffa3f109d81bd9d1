// Reading a fleet message's JSON without exceptions. Every message comes from the network
// (another member of the fleet, whatever its version or intent), so each field is checked for
// its type and bounds before it is read, and the first field that fails gives the whole
// message's one-line reason, with its place in the message ("rounds[2].origins[0].pid: not an
// unsigned integer"). Fields the reader does not ask for are ignored: a newer agent may add
// some.
//
// nlohmann-json is used through its non-throwing calls only: parse(..., nullptr, false), the
// is_*() checks, find(), and get<>() of a value whose type was checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

// NATS's own bound on a message (nats-server's default max_payload): no answer is larger.
constexpr size_t kMaxMessageBytes = 1 << 20;
// The bounds of one field: a name (node, round, file), a line of text (an expression, an
// error), and the entries of one list.
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxTextBytes = 4096;
constexpr size_t kMaxListEntries = 4096;

// The text of a message or manifest. Names come from segments (untrusted, maybe not UTF-8):
// bytes that are not valid UTF-8 become U+FFFD instead of an exception in the agent.
std::string json_text(const nlohmann::json& j, int indent = -1);

// Text a message brought, fit for one line of a terminal: valid UTF-8, control characters
// escaped (utf8::escape_text), cut to about max_bytes.
std::string printable(std::string_view text, size_t max_bytes = 256);

// text as one JSON object of at most max_bytes. Errors (kCorrupt): "too large (N bytes)",
// "not valid UTF-8", "not JSON", "not a JSON object".
Result<nlohmann::json> parse_message_object(const std::string& text,
                                            size_t max_bytes = kMaxMessageBytes);

class FieldReader {
 public:
  enum Need { kOptional, kRequired };

  // Reads object's fields; where names its place in the message ("" at the top).
  FieldReader(const nlohmann::json& object, std::string where = "");

  // Each read leaves *out as it was when the field is absent (an error if it is required) and
  // does nothing once a field has failed.
  void text(const char* key, std::string* out, size_t max_bytes, Need need = kRequired);
  // A node or fleet name (valid_name: it becomes a subject token and part of file names).
  void name(const char* key, std::string* out, Need need = kRequired);
  void u64(const char* key, uint64_t* out, Need need = kRequired);
  void u32(const char* key, uint32_t* out, Need need = kRequired);
  void i64(const char* key, int64_t* out, Need need = kRequired);
  void boolean(const char* key, bool* out, Need need = kRequired);
  // Any number; null is NaN (how the JSON writer spells a number it cannot write).
  void real(const char* key, double* out, Need need = kRequired);
  // An unsigned integer or null (*known false).
  void u64_or_null(const char* key, uint64_t* out, bool* known, Need need = kRequired);
  void texts(const char* key, std::vector<std::string>* out, size_t max_bytes,
             Need need = kRequired);
  // An object read by T::read(FieldReader&); *present says whether it was there.
  template <class T>
  void object(const char* key, T* out, bool* present = nullptr, Need need = kRequired);
  // A list of objects, each read by T::read(FieldReader&).
  template <class T>
  void objects(const char* key, std::vector<T>* out, Need need = kRequired);

  bool has(const char* key) const;
  // The field's JSON value, unchecked, for a member another typed reader reads (a live frame);
  // nullptr if absent (an error if required) or once a field has failed.
  const nlohmann::json* value(const char* key, Need need = kRequired) { return field(key, need); }
  // Fails the message at this field (the first failure is the one reported).
  void fail(const char* key, const std::string& why);
  bool ok() const { return error_->empty(); }
  // The first failure, "" if none.
  const std::string& error() const { return *error_; }
  // The message's status: kCorrupt "<what>: <first failure>".
  Status status(const std::string& what) const;

 private:
  FieldReader(const nlohmann::json& object, std::string where, std::string* error);
  // The field if present and nothing failed yet; fails a required one that is absent.
  const nlohmann::json* field(const char* key, Need need);
  std::string place(const char* key) const;
  template <class T>
  bool read_one(const nlohmann::json& value, const std::string& where, T* out);

  const nlohmann::json& object_;
  std::string where_;
  std::string own_error_;
  std::string* error_;
};

template <class T>
bool FieldReader::read_one(const nlohmann::json& value, const std::string& where, T* out) {
  if (!value.is_object()) {
    if (error_->empty()) *error_ = where + ": not an object";
    return false;
  }
  FieldReader child(value, where, error_);
  out->read(child);
  return ok();
}

template <class T>
void FieldReader::object(const char* key, T* out, bool* present, Need need) {
  if (present != nullptr) *present = false;
  const nlohmann::json* v = field(key, need);
  if (v == nullptr) return;
  if (read_one(*v, place(key), out) && present != nullptr) *present = true;
}

template <class T>
void FieldReader::objects(const char* key, std::vector<T>* out, Need need) {
  const nlohmann::json* v = field(key, need);
  if (v == nullptr) return;
  if (!v->is_array()) return fail(key, "not a list");
  if (v->size() > kMaxListEntries) {
    return fail(key, "more than " + std::to_string(kMaxListEntries) + " entries");
  }
  out->clear();
  out->reserve(v->size());
  size_t i = 0;
  for (const nlohmann::json& item : *v) {
    T one;
    if (!read_one(item, place(key) + "[" + std::to_string(i++) + "]", &one)) return;
    out->push_back(std::move(one));
  }
}

}  // namespace nanotrace::fleet
