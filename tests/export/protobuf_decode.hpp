// A small protobuf wire-format decoder for the tests of the Perfetto export: one message's
// fields, with varints, fixed64 values and length-delimited bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace nanotrace_export_test {

struct Field {
  uint32_t number;
  uint32_t wire;
  uint64_t varint = 0;
  std::string bytes;
};

inline bool decode(const std::string& buf, std::vector<Field>* out) {
  size_t i = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= buf.size()) return false;
      auto b = static_cast<uint8_t>(buf[i++]);
      *v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (i < buf.size()) {
    uint64_t key;
    if (!varint(&key)) return false;
    Field f{static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7)};
    if (f.wire == 0) {
      if (!varint(&f.varint)) return false;
    } else if (f.wire == 1) {
      if (i + 8 > buf.size()) return false;
      std::memcpy(&f.varint, buf.data() + i, 8);
      i += 8;
    } else if (f.wire == 2) {
      uint64_t n;
      if (!varint(&n) || i + n > buf.size()) return false;
      f.bytes = buf.substr(i, n);
      i += n;
    } else {
      return false;
    }
    out->push_back(std::move(f));
  }
  return true;
}

inline const Field* find(const std::vector<Field>& fs, uint32_t number) {
  for (const Field& f : fs) {
    if (f.number == number) return &f;
  }
  return nullptr;
}

// Every field with this number (a repeated field), in order.
inline std::vector<const Field*> find_all(const std::vector<Field>& fs, uint32_t number) {
  std::vector<const Field*> out;
  for (const Field& f : fs) {
    if (f.number == number) out.push_back(&f);
  }
  return out;
}

// A varint field as protobuf's int32/int64 (two's complement).
inline int64_t as_signed(const Field& f) { return static_cast<int64_t>(f.varint); }

}  // namespace nanotrace_export_test
