// nanotrace segment ABI: the byte layout of the POSIX shared-memory segment a traced process
// writes and other processes read. This header is the design document of that layout;
// docs/format.md states the same contract in prose. Every field is fixed-width and
// little-endian; every size and offset is pinned by a static_assert. Change it only together
// with kSegmentVersion and docs/format.md.
//
// Thread safety: each ring has exactly one writer (its thread). Readers never trust a byte
// of the segment: they validate every offset, size, count and string before use.
//
//   /dev/shm/nanotrace-<pid>   (mode 0600)
//   +-------------------------------+ 0
//   | SegmentHeader (4 KiB)         |  magic, version, sizes, clock calibration, state
//   +-------------------------------+ groups_offset
//   | GroupEntry[kMaxGroups]        |  group names and enable flags (another process may flip)
//   +-------------------------------+ events_offset
//   | EventEntry[events_capacity]   |  one per tracepoint call site, id = index + 1
//   +-------------------------------+ strings_offset
//   | string pool (NUL-terminated)  |  names, formats, file paths; referenced by offset
//   +-------------------------------+ threads_offset
//   | ThreadSlot[max_threads]       |  per-thread ring control: writer line, reader line
//   +-------------------------------+ rings_offset
//   | ring 0 | ring 1 | ...         |  ring_size bytes each, ring i belongs to slot i
//   +-------------------------------+ segment_size
//
// A ring is a sequence of blocks of block_size bytes. Positions are absolute byte counts
// (never wrapped); a position p lives at ring offset p & (ring_size - 1). Every block starts
// with a BlockHeader and is followed by records; a record never straddles a block end.
//
//   block: | BlockHeader (24 B) | record | record | ... | 0 (end marker, if room) | stale |
//   record: | word0 = (tsc & 0xffff'ffff'ffff) << 16 | event_id | payload (8-byte aligned) |
//
// Payload: one 8-byte slot per scalar field (signed values sign-extended to 64 bits,
// unsigned zero-extended, float/double stored as IEEE double, bool as 0/1), and for a string
// field one length byte followed by the bytes, padded to a multiple of 8 (at most
// kMaxStringBytes bytes of text). Event id 0 never names an event: a zero word0 ends a block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nanotrace::abi {

inline constexpr char kSegmentMagic[8] = {'N', 'A', 'N', 'O', 'T', 'R', 'C', 'S'};
inline constexpr uint32_t kSegmentVersion = 2;

inline constexpr uint32_t kMaxGroups = 256;
inline constexpr uint32_t kMaxFields = 16;
inline constexpr uint32_t kMaxStringBytes = 63;  // text bytes kept of a string field
inline constexpr uint32_t kNameBytes = 32;       // group and thread name buffers
inline constexpr uint32_t kBlockHeaderBytes = 24;
// Largest record: word0 plus kMaxFields string slots of 64 bytes.
inline constexpr uint32_t kMaxRecordBytes = 8 + kMaxFields * (kMaxStringBytes + 1);
inline constexpr uint64_t kTsc48Mask = (uint64_t{1} << 48) - 1;

// How a ring behaves when the writer catches up with the reader (or with itself).
enum class Mode : uint32_t {
  kOverwrite = 0,  // flight recorder: the oldest block is overwritten; never waits
  kDiscard = 1,    // the newest record is dropped and counted; never waits
  kBlock = 2,      // the writer waits for the attached consumer; with none attached, discards
};

// Timestamps are raw TSC ticks, or CLOCK_MONOTONIC nanoseconds when the TSC is not invariant.
enum class ClockKind : uint32_t { kTsc = 0, kMonotonic = 1 };

// Lifecycle of the traced process as the segment records it.
enum class ProcessState : uint32_t {
  kRunning = 0,
  kExited = 1,   // clean exit; segment kept on request
  kCrashed = 2,  // a fatal signal handler ran (crash_signal, crash_tid say which)
};

// Trigger lifecycle: kNone -> kArmed -> kFired (post-trigger window) -> kFrozen (rings stop;
// `nanotrace resume` or disarm returns to kNone / kArmed).
enum class TriggerState : uint32_t { kNone = 0, kArmed = 1, kFired = 2, kFrozen = 3 };

// Field type codes stored in EventEntry::field_types.
enum class FieldType : uint8_t {
  kNone = 0,
  kI8 = 1,
  kI16 = 2,
  kI32 = 3,
  kI64 = 4,
  kU8 = 5,
  kU16 = 6,
  kU32 = 7,
  kU64 = 8,
  kF32 = 9,
  kF64 = 10,
  kBool = 11,
  kString = 12,
  kPointer = 13,
};

// One (tick, wall clock) pair. Two pairs far apart give the tick rate.
struct ClockPair {
  uint64_t ticks;
  uint64_t realtime_ns;   // CLOCK_REALTIME
  uint64_t monotonic_ns;  // CLOCK_MONOTONIC
};
static_assert(sizeof(ClockPair) == 24);

// Duration triggers (`io:submit..io:complete by req > 5ms`, docs/reference/triggers.md): the
// facts of the last firing of one, and the pairing's counts since it was armed. Each field is
// one atomic store by the traced process: the facts by the firing before it publishes the
// state, the counts by its control thread (at least every 100 ms, and at each firing).
struct DurationFacts {
  uint32_t kind;             // of the last firing: 0 none (or a record trigger's), 1 slow, 2 stuck
  uint32_t begin_event;      // the operation's begin record: its event id,
  uint32_t begin_tid;        // thread,
  uint32_t begin_slot;       // slot,
  uint64_t begin_seq;        // per-thread record number
  uint64_t begin_ticks;      // and clock value
  uint64_t duration_ticks;   // slow: end - begin; stuck: the operation's age when it fired
  uint64_t threshold_ticks;  // the threshold it passed
  uint64_t key;              // the key: a scalar field's bits, else a hash of the key's bytes
  uint32_t key_hashed;       // 1 if key is a hash
  uint32_t stuck_count;      // stuck: operations open past the threshold when it fired
  uint64_t pairs;            // begin/end pairs matched
  uint64_t unmatched_ends;   // ends without an open begin of their key
  uint64_t replaced;         // open operations ended unmatched by a begin of the same key
  uint64_t evicted;          // open operations dropped, the oldest of a full bucket
  uint64_t unseen;           // records the pairing could not place in time
  uint64_t held_back;        // fires held back by the trigger's cap or cool-down
  uint64_t fires;
  uint64_t open;                     // operations open at the last refresh
  uint64_t oldest_open_ticks;        // the begin clock value of the oldest of them (0: none)
  uint64_t current_threshold_ticks;  // the threshold now (relative: ~0 while warming up)
  uint64_t window_pairs;             // relative: the pairs of its window
  uint64_t capacity;                 // operations the table of open operations holds
};
static_assert(sizeof(DurationFacts) == 160);

struct SegmentHeader {
  char magic[8];              // kSegmentMagic
  uint32_t version;           // kSegmentVersion
  uint32_t header_size;       // sizeof(SegmentHeader)
  uint64_t segment_size;      // total bytes of the segment
  uint32_t pid;               // traced process
  uint32_t state;             // ProcessState
  uint32_t mode;              // Mode
  uint32_t clock_kind;        // ClockKind
  uint64_t ticks_per_second;  // best current estimate, also derivable from the pairs
  ClockPair clock_start;      // taken when the segment was created
  ClockPair clock_latest;     // refreshed while the process runs (guarded by clock_seq)
  uint32_t clock_seq;         // seqlock over clock_latest: odd while being written
  uint32_t ring_size;         // bytes per ring, a power of two
  uint32_t block_size;        // bytes per block, a power of two dividing ring_size
  uint32_t max_threads;       // ThreadSlot count
  uint64_t groups_offset;
  uint64_t events_offset;
  uint32_t events_capacity;
  uint32_t events_count;  // published (release) after the entries it counts
  uint64_t strings_offset;
  uint32_t strings_capacity;
  uint32_t strings_used;
  uint64_t threads_offset;
  uint64_t rings_offset;
  uint32_t groups_count;
  uint32_t control_seq;   // futex word: bumped by a controller after changing groups/control
  uint32_t consumer_pid;  // pid of an attached consumer (recorder), 0 if none
  uint32_t crash_signal;  // signal number when state == kCrashed
  uint32_t crash_tid;
  uint32_t reserved0;
  uint64_t lost_no_slot;     // records dropped because no thread slot was free
  uint64_t lost_reclaimed;   // unread records of exited threads whose slot was reused
  char process_name[64];     // /proc/self/comm at start
  char user_name[64];        // NANOTRACE_NAME, or empty
  uint64_t proc_start_time;  // field 22 of /proc/<pid>/stat: tells a reused pid apart
  // Trigger (see TriggerState). A controller writes trigger_request and bumps control_seq;
  // the process arms it. When the armed event matches, the process keeps recording for the
  // post-trigger window, then freezes every ring and fills the trigger_* facts below.
  uint32_t trigger_state;         // TriggerState
  uint32_t trigger_event;         // event id that matched (when fired)
  uint64_t trigger_after_events;  // window: events recorded after the match (all threads)
  uint64_t trigger_after_ns;      // or: nanoseconds after the match (0 = use events)
  uint64_t trigger_ticks;         // clock value of the matching record
  uint32_t trigger_tid;           // thread that recorded it
  uint32_t trigger_slot;
  uint64_t trigger_seq;          // its per-thread record number
  uint64_t frozen_ticks;         // clock value when the rings froze
  char trigger_expr[256];        // the armed expression (NUL-terminated)
  char trigger_request[256];     // "arm EXPR", "disarm" or "resume", written by a controller
  uint32_t trigger_request_seq;  // bumped with each request
  uint32_t trigger_error_seq;    // = trigger_request_seq once a request was refused
  char trigger_error[120];       // why
  // Thread slots (version 2). slot_epoch is a futex word bumped whenever a slot becomes
  // reusable; a block-mode writer without a slot sleeps on it while slot_waiters > 0 tells
  // the consumer to drain exited threads first.
  uint32_t slot_epoch;
  uint32_t slot_waiters;
  uint64_t block_timeout_ns;  // longest a block-mode writer waits for the consumer
  uint64_t image_id;          // differs between the images of one pid (exec): AT_RANDOM
  // In-process address of the runtime that owns this segment, for another copy of the
  // runtime in the same image (a static library linked twice) to forward to. Meaningful only
  // inside the traced process, and only while the writer lock is held.
  uint64_t runtime_api;
  uint32_t trigger_done_seq;  // = trigger_request_seq once the process handled that request
  // Bumped by a controller asking for a freeze now (with a `freeze` request for the control
  // thread): a writer seeing it changed in its slow path freezes the rings itself.
  uint32_t freeze_seq;
  // `nanotrace run`: the session that started this process or an ancestor
  // (NANOTRACE_RUN_ID), so the recorder finds every process of the session; 0 if none.
  uint64_t run_id;
  uint32_t parent_pid;  // getppid() when the segment was created
  uint32_t reserved2;
  // The process's pidfs inode number (Linux 6.9+): unique per process since boot and kept
  // across exec, so it tells an earlier image of this process from an earlier process that
  // had its pid and started in the same clock tick (which proc_start_time cannot); 0 if
  // unknown.
  uint64_t proc_identity;
  // The clock value at which a controller signalled a freeze (written before it bumps
  // freeze_seq): no record begun after it is kept, so it is the freeze's time; 0 if none yet.
  uint64_t freeze_request_ticks;
  DurationFacts duration;
  uint8_t reserved[4096 - 1112 - sizeof(DurationFacts)];
};
static_assert(sizeof(SegmentHeader) == 4096);
static_assert(offsetof(SegmentHeader, version) == 8);
static_assert(offsetof(SegmentHeader, segment_size) == 16);
static_assert(offsetof(SegmentHeader, ticks_per_second) == 40);
static_assert(offsetof(SegmentHeader, clock_start) == 48);
static_assert(offsetof(SegmentHeader, clock_latest) == 72);
static_assert(offsetof(SegmentHeader, clock_seq) == 96);
static_assert(offsetof(SegmentHeader, groups_offset) == 112);
static_assert(offsetof(SegmentHeader, control_seq) == 172);
static_assert(offsetof(SegmentHeader, lost_no_slot) == 192);
static_assert(offsetof(SegmentHeader, process_name) == 208);
static_assert(offsetof(SegmentHeader, slot_epoch) == 1040);
static_assert(offsetof(SegmentHeader, image_id) == 1056);
static_assert(offsetof(SegmentHeader, trigger_done_seq) == 1072);
static_assert(offsetof(SegmentHeader, run_id) == 1080);
static_assert(offsetof(SegmentHeader, parent_pid) == 1088);
static_assert(offsetof(SegmentHeader, proc_identity) == 1096);
static_assert(offsetof(SegmentHeader, freeze_request_ticks) == 1104);
static_assert(offsetof(SegmentHeader, duration) == 1112);

struct GroupEntry {
  char name[kNameBytes];  // NUL-terminated
  uint8_t enabled;        // 1: events of this group are recorded
  uint8_t reserved[7];
};
static_assert(sizeof(GroupEntry) == 40);

struct EventEntry {
  uint32_t group;  // index into the group table
  uint32_t name;   // string pool offsets ...
  uint32_t format;
  uint32_t file;
  uint32_t line;
  uint8_t field_count;  // <= kMaxFields
  uint8_t reserved[3];
  // String pool offsets: "name", or "name:0=label,1=label" for an enum field with value
  // names (nanotrace/enum.hpp; docs/format.md, "Enum fields").
  uint32_t field_names[kMaxFields];
  uint8_t field_types[kMaxFields];  // FieldType
};
static_assert(sizeof(EventEntry) == 24 + 64 + 16);

// Thread slot state machine: kFree -> kClaiming -> kActive (a thread claimed it) -> kExited
// (the thread ended; its ring stays readable) -> kClaiming -> kActive again (reused,
// generation + 1). kClaiming is held for the few stores of a claim (readers skip it).
enum class SlotState : uint32_t { kFree = 0, kActive = 1, kExited = 2, kClaiming = 3 };

struct alignas(64) ThreadSlot {
  // Writer line: written only by the owning thread (and by its claimer), except `check`.
  uint64_t head;     // position after the last published record
  uint64_t written;  // records published in this generation: the next record's number
  uint64_t dropped;  // records dropped (discard or block mode, a nested tracepoint)
  // A claim of an exited slot compares state and generation as one u64 (docs/format.md).
  uint32_t state;       // SlotState
  uint32_t generation;  // bumped each time the slot is claimed
  uint32_t tid;
  uint32_t writer_waiting;  // futex hint: 1 while the writer sleeps for the consumer
  uint64_t start_ticks;     // clock ticks when the slot was claimed
  // Position up to which the writer may append without its slow path (the end of its
  // block). A thread that fires a trigger zeroes every slot's check, so every writer's next
  // record goes through the slow path, which applies the trigger's window.
  uint64_t check;
  uint32_t prepared;  // 1 once the ring's memory is allocated (set before the slot is claimed)
  // A ring not prepared in advance is allocated a block at a time as writers first reach
  // each block: the blocks from the ring's start allocated so far (kept across claims).
  uint32_t allocated_blocks;
  // Reader line: written only by the attached consumer.
  alignas(64) uint64_t consumed;  // position up to which the consumer has read (block/discard)
  uint32_t consumer_seq;          // futex word the writer sleeps on in block mode
  // The generation the consumed* fields describe, stored after them. A consumer that took
  // the previous thread's records may store its counts after the slot was claimed again:
  // fields of another generation mean nothing of this one was read.
  uint32_t consumed_generation;
  uint64_t consumed_records;  // records the consumer has taken
  uint64_t consumed_dropped;  // drops the consumer has accounted for (reported)
  char name[16];              // thread name at claim time (written by the claimer)
  uint8_t reserved3[8];
};
static_assert(sizeof(ThreadSlot) == 128);
static_assert(offsetof(ThreadSlot, consumed) == 64);
static_assert(offsetof(ThreadSlot, check) == 48);
static_assert(offsetof(ThreadSlot, name) == 96);
static_assert(offsetof(ThreadSlot, allocated_blocks) == 60);

struct BlockHeader {
  uint64_t position;    // absolute position of this block: a stale block from an older lap
                        // has a smaller position than expected and is rejected
  uint64_t first_seq;   // ThreadSlot::written when the block started
  uint64_t base_ticks;  // full clock value when the block started
};
static_assert(sizeof(BlockHeader) == kBlockHeaderBytes);

// Bytes one field occupies in a record payload (strings: use string_slot_bytes).
constexpr uint32_t string_slot_bytes(uint32_t text_bytes) { return (text_bytes + 1 + 7) & ~7u; }

// Full clock value of a record: the 48-bit stamp is relative to the block's base value and
// taken as a signed 48-bit difference (a thread migrating between cores may read a slightly
// earlier value than the block header).
constexpr uint64_t expand_ticks(uint64_t base_ticks, uint64_t stamp48) {
  uint64_t delta = (stamp48 - base_ticks) & kTsc48Mask;
  if (delta & (uint64_t{1} << 47)) return base_ticks - ((kTsc48Mask + 1) - delta);
  return base_ticks + delta;
}

}  // namespace nanotrace::abi
