// Decoding a record the calling thread has just written (not yet published) into field
// values, for the checks an armed call site makes before publishing it: a record trigger's
// expression (trigger_match.cc) and a duration trigger's key of several fields
// (duration_runtime.cc). Its bytes are trusted: the thread's own, of the site's own layout.
// Internal header.
#pragma once

#include <cstdint>
#include <string_view>

#include "nanotrace/detail/record_layout.hpp"
#include "nanotrace/field_value.hpp"
#include "nanotrace/nanotrace.hpp"

namespace nanotrace::runtime {

// values: at least the site's field count. A string's value is its text (bits: its length).
inline void decode_own_record(const detail::Site& site, const uint64_t* record,
                              FieldValue* values) {
  const abi::RecordLayout layout(site.types, site.field_count);
  layout.decode(
      reinterpret_cast<const uint8_t*>(record), 0, abi::kMaxRecordBytes,
      [&](uint32_t f, uint64_t bits) {
        values[f].type = layout.type(f);
        values[f].bits = bits;
      },
      [&](uint32_t f, std::string_view text) {
        values[f].type = abi::FieldType::kString;
        values[f].bits = text.size();
        values[f].text = text;
      });
}

}  // namespace nanotrace::runtime
