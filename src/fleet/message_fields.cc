// Reading a fleet message's JSON field by field, without exceptions (message_fields.hpp).
#include "fleet/message_fields.hpp"

#include <limits>

#include "base/utf8.hpp"
#include "fleet/protocol.hpp"

namespace nanotrace::fleet {

using nlohmann::json;

std::string json_text(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string printable(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return utf8::escape_text(text);
  return utf8::escape_text(text.substr(0, max_bytes)) + "...";
}

Result<json> parse_message_object(const std::string& text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return Status::Corrupt("too large (" + std::to_string(text.size()) + " bytes)");
  }
  // The parser would refuse it too, but without saying why.
  if (!utf8::is_valid(text)) return Status::Corrupt("not valid UTF-8");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Corrupt("not JSON");
  if (!j.is_object()) return Status::Corrupt("not a JSON object");
  return j;
}

FieldReader::FieldReader(const json& object, std::string where)
    : object_(object), where_(std::move(where)), error_(&own_error_) {
  if (!object_.is_object()) *error_ = (where_.empty() ? "message" : where_) + ": not an object";
}

FieldReader::FieldReader(const json& object, std::string where, std::string* error)
    : object_(object), where_(std::move(where)), error_(error) {}

std::string FieldReader::place(const char* key) const {
  return where_.empty() ? std::string(key) : where_ + "." + key;
}

void FieldReader::fail(const char* key, const std::string& why) {
  if (error_->empty()) *error_ = place(key) + ": " + why;
}

bool FieldReader::has(const char* key) const {
  return object_.is_object() && object_.find(key) != object_.end();
}

const json* FieldReader::field(const char* key, Need need) {
  if (!ok()) return nullptr;
  auto it = object_.find(key);
  if (it == object_.end()) {
    if (need == kRequired) fail(key, "missing");
    return nullptr;
  }
  return &*it;
}

Status FieldReader::status(const std::string& what) const {
  return Status::Corrupt(what + ": " + error());
}

void FieldReader::text(const char* key, std::string* out, size_t max_bytes, Need need) {
  const json* v = field(key, need);
  if (v == nullptr) return;
  if (!v->is_string()) return fail(key, "not a string");
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    return fail(key, "longer than " + std::to_string(max_bytes) + " bytes");
  }
  *out = s;
}

void FieldReader::name(const char* key, std::string* out, Need need) {
  std::string s;
  const bool present = has(key);
  text(key, &s, kMaxNameBytes, need);
  if (!ok() || !present) return;
  if (!valid_name(s)) return fail(key, "not a name ([A-Za-z0-9_-], 64 at most)");
  *out = std::move(s);
}

void FieldReader::u64(const char* key, uint64_t* out, Need need) {
  const json* v = field(key, need);
  if (v == nullptr) return;
  if (!v->is_number_unsigned()) return fail(key, "not an unsigned integer");
  *out = v->get<uint64_t>();
}

void FieldReader::u32(const char* key, uint32_t* out, Need need) {
  uint64_t wide = *out;
  u64(key, &wide, need);
  if (!ok()) return;
  if (wide > std::numeric_limits<uint32_t>::max()) return fail(key, "out of range");
  *out = static_cast<uint32_t>(wide);
}

void FieldReader::i64(const char* key, int64_t* out, Need need) {
  const json* v = field(key, need);
  if (v == nullptr) return;
  if (v->is_number_unsigned()) {
    if (v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fail(key, "out of range");
    }
    *out = static_cast<int64_t>(v->get<uint64_t>());
    return;
  }
  if (!v->is_number_integer()) return fail(key, "not an integer");
  *out = v->get<int64_t>();
}

void FieldReader::boolean(const char* key, bool* out, Need need) {
  const json* v = field(key, need);
  if (v == nullptr) return;
  if (!v->is_boolean()) return fail(key, "not true or false");
  *out = v->get<bool>();
}

void FieldReader::real(const char* key, double* out, Need need) {
  const json* v = field(key, need);
  if (v == nullptr) return;
  if (v->is_null()) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  if (!v->is_number()) return fail(key, "not a number");
  *out = v->get<double>();
}

void FieldReader::u64_or_null(const char* key, uint64_t* out, bool* known, Need need) {
  const json* v = field(key, need);
  if (v == nullptr) return;
  if (v->is_null()) {
    *known = false;
    return;
  }
  if (!v->is_number_unsigned()) return fail(key, "not an unsigned integer or null");
  *out = v->get<uint64_t>();
  *known = true;
}

void FieldReader::texts(const char* key, std::vector<std::string>* out, size_t max_bytes,
                        Need need) {
  const json* v = field(key, need);
  if (v == nullptr) return;
  if (!v->is_array()) return fail(key, "not a list");
  if (v->size() > kMaxListEntries) {
    return fail(key, "more than " + std::to_string(kMaxListEntries) + " entries");
  }
  std::vector<std::string> list;
  list.reserve(v->size());
  for (const json& item : *v) {
    const std::string at = std::string(key) + "[" + std::to_string(list.size()) + "]";
    if (!item.is_string()) return fail(at.c_str(), "not a string");
    if (item.get_ref<const std::string&>().size() > max_bytes) {
      return fail(at.c_str(), "longer than " + std::to_string(max_bytes) + " bytes");
    }
    list.push_back(item.get_ref<const std::string&>());
  }
  *out = std::move(list);
}

}  // namespace nanotrace::fleet
