// Compile-time side of a tracepoint: maps argument types to field type codes, checks the
// format string ("name={} other={}") against the arguments, and builds the constant call-site
// descriptor (Site) that the runtime registers without running the call site.
//
// Thread safety: everything here is constexpr or immutable after registration, except
// Site::enabled and Site::id, which the runtime writes and the hot path reads relaxed.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "nanotrace/abi.hpp"
#include "nanotrace/detail/utf8_cut.hpp"
#include "nanotrace/enum.hpp"

namespace nanotrace::detail {

// Process-local descriptor of one call site. Lives in the binary's data; a pointer to it is
// placed in the "nanotrace_sites" section so the runtime can enumerate all sites at start.
struct Site {
  uint8_t enabled;  // read by the hot path: one load and one branch
  uint8_t field_count;
  uint8_t is_guard;  // 1 for NANOTRACE_ENABLED(group) guards: not an event
  uint8_t reserved;
  uint16_t id;  // event id in the segment (0 until registered)
  uint16_t reserved2;
  uint32_t line;
  const char* group;
  const char* name;
  const char* format;
  const char* file;
  abi::FieldType types[abi::kMaxFields];
  // Value names per field (count 0: none), or null when no field has any (nanotrace/enum.hpp).
  const EnumNames* enums;
};

// The value names NANOTRACE_ENUM declared for T's type, found by argument-dependent lookup.
template <class T>
constexpr EnumNames enum_names_of() {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_enum_v<U>) {
    if constexpr (requires(U u) {
                    { nanotrace_enum_names(u) } -> std::same_as<EnumNames>;
                  }) {
      return nanotrace_enum_names(U{});
    }
  }
  return EnumNames{};
}

template <class... A>
struct EnumTable {
  static constexpr bool kAny = ((enum_names_of<A>().count != 0) || ... || false);
  static constexpr EnumNames kFields[sizeof...(A) + 1] = {enum_names_of<A>()..., EnumNames{}};
};

template <class T>
inline constexpr bool kIsString = std::is_same_v<T, const char*> || std::is_same_v<T, char*> ||
                                  std::is_same_v<T, std::string_view> ||
                                  std::is_same_v<T, std::string> ||
                                  (std::is_array_v<T> &&
                                   std::is_same_v<std::remove_cv_t<std::remove_extent_t<T>>, char>);

template <class T>
constexpr abi::FieldType field_type_of() {
  using abi::FieldType;
  using U = std::remove_cvref_t<T>;
  if constexpr (kIsString<U>) {
    return FieldType::kString;
  } else if constexpr (std::is_same_v<U, bool>) {
    return FieldType::kBool;
  } else if constexpr (std::is_enum_v<U>) {
    return field_type_of<std::underlying_type_t<U>>();
  } else if constexpr (std::is_pointer_v<U> || std::is_null_pointer_v<U>) {
    return FieldType::kPointer;
  } else if constexpr (std::is_floating_point_v<U>) {
    return sizeof(U) == 4 ? FieldType::kF32 : FieldType::kF64;
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
    static_assert(sizeof(U) <= 8, "nanotrace: integer fields are at most 64 bits");
    return sizeof(U) == 1   ? FieldType::kI8
           : sizeof(U) == 2 ? FieldType::kI16
           : sizeof(U) == 4 ? FieldType::kI32
                            : FieldType::kI64;
  } else if constexpr (std::is_integral_v<U>) {
    static_assert(sizeof(U) <= 8, "nanotrace: integer fields are at most 64 bits");
    return sizeof(U) == 1   ? FieldType::kU8
           : sizeof(U) == 2 ? FieldType::kU16
           : sizeof(U) == 4 ? FieldType::kU32
                            : FieldType::kU64;
  } else {
    static_assert(sizeof(U) == 0,
                  "nanotrace: a field must be an integer, enum, bool, floating point, pointer "
                  "or string (const char*, std::string_view, std::string)");
    return FieldType::kNone;
  }
}

template <class... A>
struct TypeList {
  static constexpr std::size_t kSize = sizeof...(A);
};

// Only used in decltype(): turns the macro's argument expressions into a type list.
template <class... A>
TypeList<std::remove_cvref_t<A>...> type_list(A&&...);

// Placeholders in a format: each field is written "name={}" where name is [A-Za-z_][A-Za-z0-9_]*.
// Returns the number of placeholders, or -1 if the format is malformed (a "{}" without a
// name, an unmatched brace).
constexpr int count_fields(const char* fmt) {
  int count = 0;
  for (std::size_t i = 0; fmt[i] != '\0'; ++i) {
    if (fmt[i] == '{') {
      if (fmt[i + 1] != '}') return -1;
      if (i < 2 || fmt[i - 1] != '=') return -1;
      std::size_t j = i - 1;
      std::size_t name_len = 0;
      while (j > 0) {
        char c = fmt[j - 1];
        bool ident = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '.';
        if (!ident) break;
        --j;
        ++name_len;
      }
      if (name_len == 0 || (fmt[j] >= '0' && fmt[j] <= '9')) return -1;
      ++count;
      ++i;
    } else if (fmt[i] == '}') {
      return -1;
    }
  }
  return count;
}

constexpr bool valid_identifier(const char* s) {
  if (s[0] == '\0') return false;
  for (std::size_t i = 0; s[i] != '\0'; ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok || i + 1 >= abi::kNameBytes) return false;
  }
  return true;
}

template <class List>
struct SiteBuilder;

template <class... A>
struct SiteBuilder<TypeList<A...>> {
  static constexpr Site make(const char* group, const char* name, const char* format,
                             const char* file, uint32_t line) {
    Site site{};
    site.field_count = static_cast<uint8_t>(sizeof...(A));
    site.line = line;
    site.group = group;
    site.name = name;
    site.format = format;
    site.file = file;
    abi::FieldType types[] = {field_type_of<A>()..., abi::FieldType::kNone};
    for (std::size_t i = 0; i < sizeof...(A); ++i) site.types[i] = types[i];
    site.enums = EnumTable<A...>::kAny ? EnumTable<A...>::kFields : nullptr;
    return site;
  }
};

// One Site object per call site: the Tag is the call site's unique lambda type.
template <class Tag>
struct __attribute__((visibility("hidden"))) SiteHolder {
  static inline constinit Site site = Tag{}();
};

// Bytes a string argument occupies in the record, and its text (for a C string, one byte
// more than a record keeps, so the cut can see whether it falls inside a character).
inline std::string_view string_of(const char* s) {
  return s ? std::string_view(s, ::strnlen(s, abi::kMaxStringBytes + 1)) : std::string_view();
}
inline std::string_view string_of(std::string_view s) { return s; }
inline std::string_view string_of(const std::string& s) { return s; }
// The text of a string field that its record keeps: at most kMaxStringBytes, never cut
// inside a character. A char array (a literal, or a buffer) is never read past its end, even
// unterminated, and one too short to be cut is kept whole.
template <class T>
inline std::string_view kept_text(const T& v) {
  if constexpr (std::is_array_v<T> && std::extent_v<T> <= abi::kMaxStringBytes) {
    return std::string_view(v, ::strnlen(v, std::extent_v<T>));
  } else {
    std::string_view s;
    if constexpr (std::is_array_v<T>) {
      s = std::string_view(v, ::strnlen(v, abi::kMaxStringBytes + 1));
    } else {
      s = string_of(v);
    }
    return s.substr(0, utf8_cut(s.data(), s.size(), abi::kMaxStringBytes));
  }
}

template <class T>
inline uint32_t payload_bytes(const T& v) {
  if constexpr (kIsString<std::remove_cvref_t<T>>) {
    return abi::string_slot_bytes(static_cast<uint32_t>(kept_text(v).size()));
  } else {
    return 8;
  }
}

// Stores one field at p; returns the next slot.
template <class T>
[[gnu::always_inline]] inline uint64_t* store_field(uint64_t* p, const T& v) {
  using U = std::remove_cvref_t<T>;
  if constexpr (kIsString<U>) {
    const std::string_view s = kept_text(v);
    const std::size_t n = s.size();
    uint32_t slot = abi::string_slot_bytes(static_cast<uint32_t>(n));
    p[slot / 8 - 1] = 0;  // zero the padding of the last word
    auto* bytes = reinterpret_cast<unsigned char*>(p);
    bytes[0] = static_cast<unsigned char>(n);
    std::memcpy(bytes + 1, s.data(), n);
    return p + slot / 8;
  } else if constexpr (std::is_same_v<U, bool>) {
    *p = v ? 1 : 0;
    return p + 1;
  } else if constexpr (std::is_enum_v<U>) {
    return store_field(p, static_cast<std::underlying_type_t<U>>(v));
  } else if constexpr (std::is_pointer_v<U> || std::is_null_pointer_v<U>) {
    *p = reinterpret_cast<uintptr_t>(v);
    return p + 1;
  } else if constexpr (std::is_floating_point_v<U>) {
    double d = static_cast<double>(v);
    std::memcpy(p, &d, 8);
    return p + 1;
  } else if constexpr (std::is_signed_v<U>) {
    *p = static_cast<uint64_t>(static_cast<int64_t>(v));
    return p + 1;
  } else {
    *p = static_cast<uint64_t>(v);
    return p + 1;
  }
}

}  // namespace nanotrace::detail
