// nanotrace trace file layout (docs/format.md, "Trace file"): a file header, then a sequence
// of self-checking chunks. Shared by the file writer (src/record) and the file reader
// (src/reader). Every field is fixed-width little-endian; every size is pinned below.
//
//   | FileHeader (64 B) | ChunkHeader (48 B) | payload | ChunkHeader | payload | ... | END |
//
// A chunk is valid when its header checksum matches, its payload lies inside the file and
// the payload checksum matches. A reader stops at the first invalid chunk: what precedes it
// is a valid prefix (a recorder killed mid-write, a full disk, a file still being written).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nanotrace::file {

inline constexpr char kFileMagic[8] = {'N', 'A', 'N', 'O', 'T', 'R', 'C', 'F'};
// Read: 1 has no kernel chunks nor processes (slot >> 16); 2 no NODE chunks; 3 may hold several
// nodes, whose clocks a reader must map (base/node_meta.hpp), so a reader of version 2 rejects
// it rather than mixing the nodes' clocks; 4 may hold the kernel events of several nodes (the
// node index in the high 16 bits of the kernel chunks' slot), which a reader of version 3
// would take for one machine's. Written: 3, and 4 by a merge that keeps the kernel events of
// more than the first node (kNodeKernelFileVersion).
inline constexpr uint32_t kFileVersion = 4;
inline constexpr uint32_t kWrittenFileVersion = 3;
inline constexpr uint32_t kNodeKernelFileVersion = 4;
inline constexpr uint32_t kMinFileVersion = 1;
inline constexpr uint32_t kChunkMagic = 0x4b43544e;  // "NTCK"
// Bounds a reader enforces before allocating anything.
inline constexpr uint32_t kMaxChunkBytes = 16u << 20;   // stored and raw payload sizes
inline constexpr uint32_t kMaxDataChunkRaw = 1u << 20;  // what the writer emits per DATA chunk
inline constexpr uint32_t kMaxBlockBytes = 1u << 20;    // block_size accepted from a file

enum class ChunkType : uint16_t {
  kMeta = 1,        // process, clock, groups, events, strings (a compacted segment table region)
  kThread = 2,      // a thread generation begins: identity and where its stream starts
  kData = 3,        // raw ring bytes [position, position + raw_size) of one thread generation
  kLoss = 4,        // loss counters (exact), per thread generation and per process
  kEnd = 5,         // the recording closed cleanly
  kKernelMeta = 6,  // ftrace formats, clock and losses (base/kernel_meta.hpp); version 4:
                    // slot = node << 16
  kKernelData = 7,  // raw ftrace sub-buffers of one CPU (slot = CPU; version 4: node << 16 | CPU)
  kNode = 8,        // version 3: a node's identity, clock pairs and sync (base/node_meta.hpp)
};
// The highest chunk type of a file version.
inline constexpr uint16_t max_chunk_type(uint32_t version) {
  return version >= 3 ? 8 : version == 2 ? 7 : 5;
}

inline constexpr uint16_t kChunkZstd = 1;  // payload is one zstd frame of raw_size bytes

struct FileHeader {
  char magic[8];         // kFileMagic
  uint32_t version;      // kWrittenFileVersion (kNodeKernelFileVersion: see above)
  uint32_t header_size;  // sizeof(FileHeader)
  uint32_t pid;          // traced process
  uint32_t kind;         // FileKind
  uint64_t created_ns;   // CLOCK_REALTIME when the file was created
  uint8_t reserved[28];
  uint32_t header_crc;  // crc32c of the bytes before it
};
static_assert(sizeof(FileHeader) == 64);

enum class FileKind : uint32_t { kRecording = 0, kSnapshot = 1, kRecovered = 2 };

struct ChunkHeader {
  uint32_t magic;        // kChunkMagic
  uint16_t type;         // ChunkType
  uint16_t flags;        // kChunkZstd
  uint32_t stored_size;  // payload bytes in the file
  uint32_t raw_size;     // payload bytes after decompression (== stored_size if not compressed)
  uint32_t slot;         // THREAD, DATA: thread slot; KERNEL_DATA: CPU
  uint32_t generation;   // THREAD, DATA: slot generation
  uint64_t position;     // DATA: ring position of the first payload byte; KERNEL_DATA: the
                         // CPU's byte count before it
  uint64_t index;        // chunk number, from 0
  uint32_t payload_crc;  // crc32c of the stored payload
  uint32_t header_crc;   // crc32c of the 44 bytes before it
};
static_assert(sizeof(ChunkHeader) == 48);
static_assert(offsetof(ChunkHeader, header_crc) == 44);

struct ThreadPayload {
  uint32_t slot;
  uint32_t generation;
  uint32_t tid;
  uint32_t state;  // abi::SlotState when first seen
  uint64_t start_ticks;
  uint64_t first_pos;         // records before this position are not part of the stream
  uint64_t first_seq;         // per-thread seq of the record at first_pos
  uint64_t dropped_at_start;  // ThreadSlot::dropped when the stream began
  char name[16];
};
static_assert(sizeof(ThreadPayload) == 64);

struct LossEntry {
  uint32_t slot;
  uint32_t generation;
  uint64_t written;  // ThreadSlot::written
  uint64_t dropped;  // ThreadSlot::dropped
  uint32_t state;    // abi::SlotState
  uint32_t reserved;
};
static_assert(sizeof(LossEntry) == 32);

struct LossPayload {
  uint64_t lost_no_slot;    // SegmentHeader::lost_no_slot
  uint64_t lost_reclaimed;  // SegmentHeader::lost_reclaimed
  uint32_t count;           // LossEntry records that follow
  uint32_t reserved;
};
static_assert(sizeof(LossPayload) == 24);

enum class EndReason : uint32_t {
  kComplete = 0,     // snapshot or recovery finished
  kInterrupted = 1,  // SIGINT / SIGTERM
  kTargetExited = 2,
  kDuration = 3,
  kStopOn = 4,
  kError = 5,
};

struct EndPayload {
  uint64_t chunks;      // chunks before this one
  uint64_t data_bytes;  // raw DATA bytes written
  uint64_t records;     // records the writer counted (0 if it did not walk them)
  uint32_t reason;      // EndReason
  uint32_t reserved;
};
static_assert(sizeof(EndPayload) == 32);

// CRC-32C (Castagnoli), hardware-accelerated with SSE4.2 when available.
uint32_t crc32c(uint32_t crc, const void* data, size_t size);

}  // namespace nanotrace::file
