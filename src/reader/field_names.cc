// Field names and enum value names as the segment and trace files store them.
#include "reader/field_names.hpp"

#include <charconv>
#include <string_view>

namespace nanotrace {

const std::string* FieldInfo::name_of(uint64_t bits) const {
  const auto value = static_cast<int64_t>(bits);
  for (const ValueName& v : value_names) {
    if (v.value == value) return &v.name;
  }
  return nullptr;
}

namespace reader {
namespace {

bool is_integer(abi::FieldType t) { return t >= abi::FieldType::kI8 && t <= abi::FieldType::kU64; }

// "0=sync,1=uring-ready" -> entries; false if any entry is malformed.
bool parse_value_names(std::string_view list, std::vector<ValueName>* out) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view entry = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq + 1 == entry.size()) return false;
    int64_t value = 0;
    const char* end = entry.data() + eq;
    auto [ptr, ec] = std::from_chars(entry.data(), end, value);
    if (ec != std::errc() || ptr != end) return false;
    out->push_back({value, std::string(entry.substr(eq + 1))});
  }
  return true;
}

}  // namespace

FieldInfo field_info(const std::string& stored_name, abi::FieldType type) {
  FieldInfo info;
  info.type = type;
  const size_t colon = stored_name.find(':');
  info.name = stored_name.substr(0, colon);
  if (colon == std::string::npos || !is_integer(type)) return info;
  if (!parse_value_names(std::string_view(stored_name).substr(colon + 1), &info.value_names)) {
    info.value_names.clear();
  }
  return info;
}

}  // namespace reader
}  // namespace nanotrace
