// The value names of enum fields, written once into the segment's string pool when a call
// site is published: the runtime side of nanotrace/enum.hpp.
#include "runtime/enum_fields.hpp"

#include <cstring>
#include <string>

namespace nanotrace::runtime {
namespace {
// Longest stored name with its value names: the pool grows in small steps, and a huge enum
// keeps the names of its first values only (the others print as numbers).
constexpr size_t kMaxStoredBytes = 4096;
}  // namespace

void publish_enum_names_locked(Segment& segment, const detail::Site& site, abi::EventEntry* entry) {
  if (site.enums == nullptr) return;
  const abi::SegmentHeader* h = segment.header();
  const char* pool = reinterpret_cast<const char*>(segment.base + h->strings_offset);
  for (uint32_t f = 0; f < entry->field_count; ++f) {
    const EnumNames& names = site.enums[f];
    if (names.count == 0 || entry->field_names[f] == 0) continue;
    std::string text = pool + entry->field_names[f];
    char sep = ':';
    for (uint32_t i = 0; i < names.count; ++i) {
      const char* label = names.names[i].name;
      if (label == nullptr || label[0] == '\0') continue;
      if (text.size() + 24 + std::strlen(label) > kMaxStoredBytes) break;
      text += sep;
      text += std::to_string(names.names[i].value);
      text += '=';
      for (const char* c = label; *c != '\0'; ++c) text += (*c == ',' || *c == '=') ? '_' : *c;
      sep = ',';
    }
    if (uint32_t offset = intern_string(segment, text.c_str()); offset != 0) {
      entry->field_names[f] = offset;
    }
  }
}

}  // namespace nanotrace::runtime
