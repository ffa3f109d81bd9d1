// Value names for enum fields, in the spirit of LTTng's enum mappings: declared once next to
// the enum, found at compile time by every tracepoint that records a value of that type, and
// stored once in the segment, so that `dump`, every exporter and the report print
// `backend=uring-link` instead of `backend=3`, and CTF declares the field as a CTF enum.
//
//   namespace io {
//   enum class Backend : uint8_t { kSync, kUring };
//   NANOTRACE_ENUM(Backend, {Backend::kSync, "sync"}, {Backend::kUring, "uring"});
//   }
//
// NANOTRACE_ENUM must appear in the enum's own namespace (it defines a constexpr function
// found by argument-dependent lookup) with the enum's unqualified name. A name is stored as
// written, except ',' and '=' (which separate entries in the segment) become '_'. A value
// without a name prints as its number.
//
// Thread safety: constants.
#pragma once

#include <cstdint>

namespace nanotrace {

struct EnumName {
  int64_t value;
  const char* name;
  template <class E>
  constexpr EnumName(E v, const char* n) : value(static_cast<int64_t>(v)), name(n) {}
};

struct EnumNames {
  const EnumName* names = nullptr;
  uint32_t count = 0;
};

}  // namespace nanotrace

#define NANOTRACE_ENUM(Type, ...)                                                          \
  inline constexpr ::nanotrace::EnumName nanotrace_enum_names_of_##Type[] = {__VA_ARGS__}; \
  constexpr ::nanotrace::EnumNames nanotrace_enum_names(Type) {                            \
    return {nanotrace_enum_names_of_##Type,                                                \
            sizeof(nanotrace_enum_names_of_##Type) / sizeof(::nanotrace::EnumName)};       \
  }                                                                                        \
  static_assert(true, "a semicolon may follow")
