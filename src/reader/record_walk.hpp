// Walking the records of one block without decoding them: the sizes of records (from the
// event table) and the block walk shared by the live and file thread streams. A span of
// records that passed the walk is what RecordSpan hands out and what decode_record decodes.
// Internal header.
#pragma once

#include <cstdint>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::reader {

// Record sizes by event id, from a trace's event table. A record is valid when its id names
// an event (not a guard), its string lengths are at most kMaxStringBytes and it fits in the
// bytes given: the same rules as decode_record.
class RecordSizer {
 public:
  explicit RecordSizer(const Trace& trace);
  // Size of the record at buf[offset, limit), or 0 if it is malformed.
  uint32_t size(const uint8_t* buf, uint32_t offset, uint32_t limit) const {
    if (offset + 8 > limit) return 0;
    uint16_t id;
    __builtin_memcpy(&id, buf + offset, 2);
    if (id >= fixed_.size()) return 0;
    uint32_t n = fixed_[id];
    if (n == kVariable) return variable_size(id, buf, offset, limit);
    return n != 0 && offset + n <= limit ? n : 0;
  }

 private:
  static constexpr uint32_t kVariable = ~uint32_t{0};
  uint32_t variable_size(uint16_t id, const uint8_t* buf, uint32_t offset, uint32_t limit) const;

  // The layout of an event with strings: scalar slots before each string, then after the last.
  struct Variable {
    std::vector<uint8_t> scalars_before;
    uint32_t scalars_after = 0;
  };
  std::vector<uint32_t> fixed_;     // by id: bytes, kVariable (strings), 0 = invalid
  std::vector<Variable> variable_;  // by id, for kVariable events
};

// How a walk over a block ended.
enum class WalkEnd : uint8_t {
  kBlock,    // end marker or end of the copied bytes: the block is done
  kCorrupt,  // a malformed record: the rest of the block is unusable
};

// Walks the records of buf[*offset, len) (a block whose record at *offset has sequence
// number *seq), skipping records that start before skip_before (block_pos: position of buf[0];
// records before skip_before were taken by an earlier consumer). Fills span with the
// following records up to the end of the block. Advances *offset and *seq past every record
// walked.
WalkEnd walk_block(const RecordSizer& sizer, const uint8_t* buf, uint32_t len, uint64_t block_pos,
                   uint64_t skip_before, uint64_t base_ticks, uint32_t* offset, uint64_t* seq,
                   RecordSpan* span);

}  // namespace nanotrace::reader
