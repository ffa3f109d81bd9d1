// A small protobuf wire-format decoder for the tests of the Perfetto export: one message's
// fields, with varints, fixed64 values and length-delimited bytes; and Perfetto's interning
// as its trace processor applies it (InternTables), written from Perfetto's protos
// (trace_packet.proto, interned_data.proto, track_event.proto, debug_annotation.proto).
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
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

// The interning tables of one packet sequence, as Perfetto's trace processor builds them:
// each TracePacket's interned_data (12) adds entries, SEQ_INCREMENTAL_STATE_CLEARED (sequence
// flag 1) empties them, and a packet that refers to them must say so
// (SEQ_NEEDS_INCREMENTAL_STATE, flag 2). Names resolve through them: a TrackEvent's category
// (22, or category_iids 3 in EventCategory entries, interned_data 1), its name (23, or
// name_iid 10 in EventName entries, interned_data 2), a DebugAnnotation's name (10, or
// name_iid 1 in DebugAnnotationName entries, interned_data 3). Each entry: iid 1, name 2.
struct InternTables {
  std::map<uint64_t, std::string> categories, names, annotation_names;
  bool valid = false;  // the state was cleared once
  std::string error;   // the first fault found, "" if none

  // Takes one TracePacket's decoded fields, in sequence order.
  void add_packet(const std::vector<Field>& packet) {
    const Field* flags = find(packet, 13);
    if (flags && (flags->varint & 1)) {
      categories.clear();
      names.clear();
      annotation_names.clear();
      valid = true;
    }
    const Field* data = find(packet, 12);
    if (data && !valid) fail("interned data before the state was cleared");
    if (data && !(flags && (flags->varint & 2))) {
      fail("interned data in a packet without SEQ_NEEDS_INCREMENTAL_STATE");
    }
    if (data) {
      std::vector<Field> tables;
      if (!decode(data->bytes, &tables)) return fail("interned_data does not decode");
      for (const Field& t : tables) {
        std::map<uint64_t, std::string>* table = t.number == 1   ? &categories
                                                 : t.number == 2 ? &names
                                                 : t.number == 3 ? &annotation_names
                                                                 : nullptr;
        if (!table) continue;
        std::vector<Field> entry;
        if (!decode(t.bytes, &entry)) return fail("an interned entry does not decode");
        const Field* iid = find(entry, 1);
        const Field* name = find(entry, 2);
        if (!iid || !name || iid->varint == 0) return fail("an interned entry without iid or name");
        auto [it, added] = table->emplace(iid->varint, name->bytes);
        if (!added && it->second != name->bytes) fail("an iid given twice with different names");
      }
    }
    if (const Field* te = find(packet, 11)) {
      std::vector<Field> ev;
      if (decode(te->bytes, &ev) && (find(ev, 3) || find(ev, 10)) &&
          !(flags && (flags->varint & 2))) {
        fail("a TrackEvent uses interned names without SEQ_NEEDS_INCREMENTAL_STATE");
      }
    }
  }
  // A TrackEvent's name: inline, or through its name_iid; "?" for an unknown iid.
  std::string event_name(const std::vector<Field>& ev) const { return resolve(ev, 23, 10, names); }
  std::string category(const std::vector<Field>& ev) const {
    return resolve(ev, 22, 3, categories);
  }
  // A DebugAnnotation's name.
  std::string annotation_name(const std::vector<Field>& annotation) const {
    return resolve(annotation, 10, 1, annotation_names);
  }

 private:
  void fail(const std::string& why) {
    if (error.empty()) error = why;
  }
  static std::string resolve(const std::vector<Field>& msg, uint32_t inline_field,
                             uint32_t iid_field, const std::map<uint64_t, std::string>& table) {
    if (const Field* f = find(msg, inline_field)) return f->bytes;
    const Field* iid = find(msg, iid_field);
    if (!iid) return "";
    auto it = table.find(iid->varint);
    return it == table.end() ? "?" : it->second;
  }
};

}  // namespace nanotrace_export_test
