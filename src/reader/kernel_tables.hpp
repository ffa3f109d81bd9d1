// The kernel events of a trace file (KERNEL_META): the stored header_page and event formats
// parsed with libtraceevent into EventInfo entries, and the decoding of one raw ftrace event
// into a Record's fields. Internal header.
//
// Every stored byte is untrusted: a format libtraceevent refuses leaves its event out; a
// field whose offset or size falls outside the event's bytes is shown empty.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/kernel_meta.hpp"
#include "nanotrace/reader.hpp"

struct tep_handle;
struct tep_event;
struct tep_format_field;

namespace nanotrace::reader {

class KernelTables {
 public:
  // Errors: kCorrupt (the header_page text does not parse, no event format parses).
  static Result<std::shared_ptr<KernelTables>> build(file::KernelMeta meta);
  ~KernelTables();
  KernelTables(const KernelTables&) = delete;
  KernelTables& operator=(const KernelTables&) = delete;

  const file::KernelMeta& meta() const { return meta_; }
  const std::vector<EventInfo>& events() const { return events_; }
  // Size of the sub-buffer header (timestamp and commit words) before the events.
  uint32_t page_header_bytes() const { return meta_.long_size == 8 ? 16 : 12; }

  // Fills r's event, task and fields from one event's bytes (size checked by the caller);
  // false if its type is not one of the stored formats. Texts the record shows that are not
  // in the event's bytes (arrays shown in hex) go to scratch.
  bool decode(const uint8_t* data, uint32_t size, Record* r,
              std::array<std::string, abi::kMaxFields>* scratch) const;

 private:
  KernelTables() = default;
  struct Field {
    std::string name;
    int offset = 0;
    int size = 0;
    unsigned long flags = 0;
    bool is_char = false;  // char array or __data_loc char[]: shown as text
  };
  struct Event {
    std::vector<Field> fields;  // the shown ones, at most abi::kMaxFields
  };
  file::KernelMeta meta_;
  tep_handle* tep_ = nullptr;
  std::vector<EventInfo> events_;
  std::vector<Event> decoders_;                     // parallel to events_
  std::unordered_map<uint32_t, uint32_t> by_type_;  // ftrace event id -> index
  int pid_offset_ = -1;                             // common_pid
};

}  // namespace nanotrace::reader
