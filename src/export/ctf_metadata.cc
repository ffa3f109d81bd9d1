// The TSDL metadata of a CTF 1.8 export: types, trace, env, clock, stream and one event
// declaration per nanotrace event, laid out to match the raw records (see ctf.hpp). A trace of
// several processes is exported as one CTF trace per process, each with this metadata and its
// process's procname and vpid in the env (LTTng's per-process convention).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <set>

#include "base/node_identity.hpp"
#include "base/utf8.hpp"
#include "export/ctf.hpp"

namespace nanotrace::exporter::ctf {
namespace {

bool is_tsdl_keyword(const std::string& s) {
  static const std::set<std::string> kWords = {
      "align",   "callsite", "const",          "char",   "clock",   "double",   "enum",
      "env",     "event",    "floating_point", "float",  "integer", "int",      "long",
      "short",   "signed",   "stream",         "string", "struct",  "trace",    "typealias",
      "typedef", "unsigned", "variant",        "void",   "_Bool",   "_Complex", "_Imaginary"};
  return kWords.count(s) != 0;
}

}  // namespace

// A TSDL identifier for a field name. babeltrace2 strips one leading underscore from CTF 1.8
// field names, so keywords and names starting with '_' get one prepended.
std::string field_identifier(const std::string& name, std::set<std::string>* used) {
  std::string id;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    id += ok ? c : '_';
  }
  if (id.empty() || (id[0] >= '0' && id[0] <= '9')) id = "_" + id;
  if (is_tsdl_keyword(id) || (id[0] == '_' && name[0] == '_')) id = "_" + id;
  std::string unique = id;
  for (int n = 2; used->count(unique); ++n) unique = id + "_" + std::to_string(n);
  used->insert(unique);
  return unique;
}

std::string tsdl_string(std::string_view raw) {
  std::string s = utf8::valid(raw);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    out += c;
  }
  return out + "\"";
}

std::string uuid_text(const uint8_t uuid[16]) {
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", uuid[i]);
  }
  return s;
}

ExportClock export_clock(Trace& trace) {
  ExportClock clock;
  make_uuid(trace.process(), clock.uuid);
  // The reader's time origin is already the earliest event; a kernel stamp before it is one
  // more than an hour before the first segment's start (Trace::time_origin), damage rather
  // than an early event: the clock's origin moves back for it by at most kMaxLeadNs.
  constexpr int64_t kMaxLeadNs = 3600 * int64_t{1000000000};
  int64_t earliest = 0;
  for (uint32_t c = 0; c < trace.kernel_cpu_count(); ++c) {
    Record r;
    if (trace.read_kernel_cpu(c)->next(&r)) {
      earliest = std::min(earliest, signed_ns(trace, r.ticks));
    }
  }
  clock.lead_ns = static_cast<uint64_t>(std::min(-earliest, kMaxLeadNs));
  return clock;
}

int64_t signed_ns(const Trace& trace, uint64_t ticks) {
  // ticks_to_ns counts from the time origin and stops at 0: an earlier value (a damaged
  // stamp) is measured as the same distance after the origin.
  constexpr uint64_t kMax = INT64_MAX;
  const uint64_t start = trace.time_origin().ticks;
  if (ticks >= start) return static_cast<int64_t>(std::min(trace.ticks_to_ns(ticks), kMax));
  const uint64_t before = start - ticks;
  if (before > UINT64_MAX - start) return -static_cast<int64_t>(kMax);  // a damaged start
  return -static_cast<int64_t>(std::min(trace.ticks_to_ns(start + before), kMax));
}

std::string clock_declaration(const Trace& trace, const ExportClock& clock) {
  const uint64_t origin = trace.time_origin().realtime_ns - clock.lead_ns;
  const char* since =
      clock.lead_ns > 0 || trace.time_origin().ticks != trace.process().clock_start.ticks
          ? "earliest event"
      : trace.processes().size() > 1 ? "first process's segment start"
                                     : "segment start";
  return fmt::format(
      "clock {{\n  name = nanotrace;\n  uuid = \"{}\";\n"
      "  description = \"nanotrace time since the {}, in ns\";\n"
      "  freq = 1000000000;\n  precision = 1;\n  offset_s = {};\n  offset = {};\n"
      "  absolute = true;\n}};\n\n",
      uuid_text(clock.uuid), since, origin / 1000000000, origin % 1000000000);
}

// The field types below are declared in metadata() with align = 64: each occupies the first
// bytes of its 8-byte slot (little-endian), the rest is skipped as alignment padding.
const char* tsdl_type(abi::FieldType t) {
  using abi::FieldType;
  switch (t) {
    case FieldType::kI8:
      return "int8_t";
    case FieldType::kI16:
      return "int16_t";
    case FieldType::kI32:
      return "int32_t";
    case FieldType::kI64:
      return "int64_t";
    case FieldType::kU8:
    case FieldType::kBool:
      return "uint8_t";
    case FieldType::kU16:
      return "uint16_t";
    case FieldType::kU32:
      return "uint32_t";
    case FieldType::kF32:  // recorded as an IEEE double: the value is exact
    case FieldType::kF64:
      return "double";
    case FieldType::kPointer:
      return "xint64_t";
    default:
      return "uint64_t";
  }
}

uint32_t declared_bytes(abi::FieldType t) {
  using abi::FieldType;
  switch (t) {
    case FieldType::kI8:
    case FieldType::kU8:
    case FieldType::kBool:
      return 1;
    case FieldType::kI16:
    case FieldType::kU16:
      return 2;
    case FieldType::kI32:
    case FieldType::kU32:
      return 4;
    default:
      return 8;
  }
}

void make_uuid(const ProcessInfo& p, uint8_t uuid[16]) {
  uint64_t a = p.clock_start.realtime_ns ^ (uint64_t{p.pid} << 32);
  // The node too: two nodes' snapshots of one process (or of pid-namespaced twins) differ.
  uint64_t b = p.clock_start.ticks * 0x9e3779b97f4a7c15ull ^ p.clock_start.monotonic_ns ^
               uint64_t { p.node } << 48;
  for (uint64_t* x : {&a, &b}) {
    *x ^= *x >> 33;
    *x *= 0xff51afd7ed558ccdull;
    *x ^= *x >> 33;
  }
  std::memcpy(uuid, &a, 8);
  std::memcpy(uuid + 8, &b, 8);
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x40);
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);
}

namespace {

// The integer, floating-point and character types the declarations below use.
void write_type_aliases(fmt::memory_buffer& m) {
  auto out = std::back_inserter(m);
  // Packet header and context: byte-aligned.
  for (int bits : {8, 32, 64}) {
    fmt::format_to(out,
                   "typealias integer {{ size = {0}; align = 8; signed = false; }} := "
                   "packed_uint{0}_t;\n",
                   bits);
  }
  // Event fields: one 8-byte slot each.
  for (int bits : {8, 16, 32, 64}) {
    fmt::format_to(out,
                   "typealias integer {{ size = {0}; align = 64; signed = false; }} := "
                   "uint{0}_t;\n"
                   "typealias integer {{ size = {0}; align = 64; signed = true; }} := "
                   "int{0}_t;\n",
                   bits);
  }
  fmt::format_to(out,
                 "typealias integer {{ size = 64; align = 64; signed = false; base = 16; }} := "
                 "xint64_t;\n"
                 "typealias floating_point {{ exp_dig = 11; mant_dig = 53; align = 64; }} := "
                 "double;\n"
                 "typealias integer {{ size = 8; align = 8; signed = false; encoding = UTF8; }} "
                 ":= utf8_char_t;\n\n");
}

// The host a process ran on: its node's in a merged trace, else this machine's.
std::string node_hostname(const Trace& trace, const ProcessInfo& p) {
  return p.node < trace.nodes().size() ? trace.nodes()[p.node].hostname : sys::hostname();
}

// The trace block (packet header) and the environment.
void write_trace_and_env(fmt::memory_buffer& m, const Trace& trace, const ProcessInfo& p,
                         const uint8_t uuid[16]) {
  auto out = std::back_inserter(m);
  fmt::format_to(out,
                 "trace {{\n  major = 1;\n  minor = 8;\n  uuid = \"{}\";\n  byte_order = le;\n"
                 "  packet.header := struct {{\n    packed_uint32_t magic;\n"
                 "    packed_uint8_t uuid[16];\n    packed_uint32_t stream_id;\n"
                 "    packed_uint64_t stream_instance_id;\n  }};\n}};\n\n",
                 uuid_text(uuid));
  fmt::format_to(out,
                 "env {{\n  tracer_name = \"nanotrace\";\n  tracer_major = 0;\n"
                 "  tracer_minor = 1;\n  hostname = {};\n  procname = {};\n  vpid = {};\n"
                 "  clock_ticks_per_second = {};\n}};\n\n",
                 tsdl_string(node_hostname(trace, p)), tsdl_string(p.process_name), p.pid,
                 p.ticks_per_second);
}

// The one stream: packet context and event header.
void write_stream(fmt::memory_buffer& m) {
  auto out = std::back_inserter(m);
  // The event header is a record's word0: id in bits 0-15, the clock stamp in bits 16-63.
  fmt::format_to(out,
                 "typealias integer {{ size = 64; align = 8; signed = false; "
                 "map = clock.nanotrace.value; }} := packed_uint64_clock_t;\n\n"
                 "stream {{\n  id = 0;\n  packet.context := struct {{\n"
                 "    packed_uint64_clock_t timestamp_begin;\n"
                 "    packed_uint64_clock_t timestamp_end;\n"
                 "    packed_uint64_t content_size;\n    packed_uint64_t packet_size;\n"
                 "    packed_uint64_t packet_seq_num;\n    packed_uint64_t events_discarded;\n"
                 "    packed_uint32_t tid;\n  }};\n"
                 "  event.header := struct {{\n"
                 "    integer {{ size = 16; align = 1; signed = false; }} id;\n"
                 "    integer {{ size = 48; align = 1; signed = false; "
                 "map = clock.nanotrace.value; }} timestamp;\n"
                 "  }} align(64);\n}};\n");
}

// An event's declaration: one field per recorded field, in its 8-byte slot.
void write_event(fmt::memory_buffer& m, const EventInfo& e) {
  auto out = std::back_inserter(m);
  fmt::format_to(out, "\nevent {{\n  name = {};\n  id = {};\n  stream_id = 0;\n",
                 tsdl_string(e.full_name()), e.id);
  std::set<std::string> used;
  fmt::format_to(out, "  fields := struct {{\n");
  for (const FieldInfo& f : e.fields) {
    if (f.type == abi::FieldType::kString) {
      // The record's string slot as it is: a length byte, then the bytes.
      std::string length = field_identifier("_" + f.name + "_len", &used);
      fmt::format_to(out, "    uint8_t {0};\n    utf8_char_t {1}[{0}];\n", length,
                     field_identifier(f.name, &used));
    } else if (!f.value_names.empty()) {
      // An enum with value names (nanotrace/enum.hpp): a CTF enum over the same integer.
      fmt::format_to(out, "    enum : {} {{", tsdl_type(f.type));
      for (size_t i = 0; i < f.value_names.size(); ++i) {
        fmt::format_to(out, "{} {} = {}", i ? "," : "", tsdl_string(f.value_names[i].name),
                       f.value_names[i].value);
      }
      fmt::format_to(out, " }} {};\n", field_identifier(f.name, &used));
    } else {
      fmt::format_to(out, "    {} {};\n", tsdl_type(f.type), field_identifier(f.name, &used));
    }
  }
  fmt::format_to(out, "  }};\n}};\n");
}

}  // namespace

std::string metadata(const Trace& trace, const ProcessInfo& p, const uint8_t uuid[16],
                     const ExportClock& clock) {
  fmt::memory_buffer m;
  fmt::format_to(std::back_inserter(m), "/* CTF 1.8 */\n\n");
  write_type_aliases(m);
  write_trace_and_env(m, trace, p, uuid);
  fmt::format_to(std::back_inserter(m), "{}", clock_declaration(trace, clock));
  write_stream(m);
  for (const EventInfo& e : trace.events()) {
    if (!e.is_guard) write_event(m, e);
  }
  return fmt::to_string(m);
}

}  // namespace nanotrace::exporter::ctf
