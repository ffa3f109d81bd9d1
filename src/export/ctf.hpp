// CTF 1.8 export, internal header: the packet layout shared by the TSDL metadata
// (ctf_metadata.cc) and the stream writer (ctf_writer.cc). See docs/export.md.
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
#include <string>

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

// The TSDL metadata text (starting with "/* CTF 1.8 */") for trace's events, as the CTF trace
// of `process` (its env's procname and vpid): uuid is that trace's, clock_uuid the clock's
// (the first process's uuid: every process's timestamps count from its segment start).
std::string metadata(const Trace& trace, const ProcessInfo& process, const uint8_t uuid[16],
                     const uint8_t clock_uuid[16]);

}  // namespace nanotrace::exporter::ctf
