// Publishing the value names of a call site's enum fields into the segment (see
// nanotrace/enum.hpp and docs/format.md, "Enum fields"). Internal header.
#pragma once

#include "nanotrace/abi.hpp"
#include "nanotrace/detail/fields.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {

// For each field of `site` that has value names, replaces entry->field_names[f] (already the
// field's name) by "name:value=label,value=label,...", interned once in the string pool (at
// most 4 KiB: the names of later values are left out). A full pool leaves the plain name. REQUIRES:
// Runtime::mu held, entry not yet published.
void publish_enum_names_locked(Segment& segment, const detail::Site& site, abi::EventEntry* entry);

}  // namespace nanotrace::runtime
