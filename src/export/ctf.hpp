// CTF 1.8 export, internal header: the packet layout shared by the TSDL metadata
// (ctf_metadata.cc) and the stream writer (ctf_writer.cc), and the kernel trace written beside
// the user-space ones (ctf_kernel.cc). See docs/export.md.
//
// The event layout is chosen so that nanotrace's raw records are valid CTF events: the event
// header is word0 read as a little-endian bit field (16-bit id, then a 48-bit timestamp),
// every scalar field is an 8-byte slot (declared with align = 64 and its own width, so the
// reader skips the slot's upper bytes as padding), and a string slot (`len, bytes, padding`)
// is declared as a length field followed by a UTF-8 sequence of that length, as LTTng does.
// Exporting a record is a copy plus rewriting its 48-bit clock stamp into nanoseconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "nanotrace/reader.hpp"

namespace nanotrace::exporter::ctf {

inline constexpr uint32_t kMagic = 0xC1FC1FC1;
// Packet header: magic u32, uuid u8[16], stream_id u32, stream_instance_id u64.
inline constexpr size_t kPacketHeaderBytes = 4 + 16 + 4 + 8;
// Packet context: timestamp_begin, timestamp_end, content_size, packet_size, packet_seq_num,
// events_discarded (u64 each), tid (u32).
inline constexpr size_t kPacketContextBytes = 6 * 8 + 4;
// Events start 8-aligned (the event header is align(64)): 4 bytes of padding first.
inline constexpr size_t kPacketPrefix = 88;
static_assert(kPacketPrefix >= kPacketHeaderBytes + kPacketContextBytes && kPacketPrefix % 8 == 0);

// Largest record once its strings are made valid UTF-8: every byte of every string may
// become a 3-byte U+FFFD.
inline constexpr size_t kMaxRepairedRecordBytes =
    8 + abi::kMaxFields * abi::string_slot_bytes(3 * abi::kMaxStringBytes);
static_assert(3 * abi::kMaxStringBytes <= 255, "a repaired string's length fits its u8");

// A uuid derived from the segment's identity: exporting the same trace twice gives the same.
void make_uuid(const ProcessInfo& process, uint8_t uuid[16]);

// Metadata pieces shared by the user-space and kernel traces (ctf_metadata.cc).
// A TSDL identifier for a field name, unique among `used` (which it extends). babeltrace2
// strips one leading underscore from CTF 1.8 field names, so keywords and names starting
// with '_' get one prepended.
std::string field_identifier(const std::string& name, std::set<std::string>* used);
// A quoted TSDL string literal: valid UTF-8, quotes and backslashes escaped, controls blanked.
std::string tsdl_string(std::string_view raw);
// The TSDL type a scalar field is declared with ("int8_t", "double", "xint64_t"...), and the
// bytes that type reads.
const char* tsdl_type(abi::FieldType t);
uint32_t declared_bytes(abi::FieldType t);
std::string uuid_text(const uint8_t uuid[16]);

// The clock of an export, which all its CTF traces declare identically (so that babeltrace2
// merges them): ns since the first process's segment start or, when kernel events precede it
// (`nanotrace run --kernel` starts the capture before the command), since the earliest one,
// lead_ns earlier. uuid: the first process's trace uuid.
struct ExportClock {
  uint8_t uuid[16] = {};
  uint64_t lead_ns = 0;
};
ExportClock export_clock(Trace& trace);
// A clock value in ns since the first process's segment start, negative before it.
int64_t signed_ns(const Trace& trace, uint64_t ticks);
// The `clock nanotrace` block.
std::string clock_declaration(const Trace& trace, const ExportClock& clock);

// The TSDL metadata text (starting with "/* CTF 1.8 */") for trace's events, as the CTF trace
// of `process` (its env's procname and vpid): uuid is that trace's; every process's
// timestamps are on the export's clock.
std::string metadata(const Trace& trace, const ProcessInfo& process, const uint8_t uuid[16],
                     const ExportClock& clock);

// Kernel events (a trace file recorded with --kernel), ctf_kernel.cc and ctf_kernel_names.cc.
// The CTF name of a kernel event and of one of its fields: LTTng's kernel tracer's where it
// names them differently from ftrace (syscall_entry_read, sched_switch's next_tid), else
// ftrace's.
std::string kernel_event_name(const EventInfo& event);
std::string kernel_field_name(const EventInfo& event, const std::string& field);
// The TSDL metadata of the kernel trace: env domain "kernel", per-CPU streams (cpu_id in the
// packet context, `_tid` event context) and one event per kernel event of trace.
std::string kernel_metadata(const Trace& trace, const uint8_t uuid[16], const ExportClock& clock);

struct KernelExport {
  uint64_t records = 0;
  uint64_t lost = 0;  // ftrace's losses, all CPUs
  uint64_t corrupt_blocks = 0;
  uint32_t streams = 0;  // CPUs written
  uint64_t bytes = 0;    // metadata and streams
  uint64_t buffer_bytes = 0;
};
// Writes trace's kernel events as a CTF trace in dir (created, mode 0700; it must not exist):
// its metadata and one stream per CPU with events or losses, stream-cpuN. Writes nothing
// when trace has none.
Result<KernelExport> export_kernel(Trace& trace, const std::string& dir, uint64_t packet_bytes,
                                   const ExportClock& clock);

}  // namespace nanotrace::exporter::ctf
