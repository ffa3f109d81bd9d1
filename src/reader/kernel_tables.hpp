// The kernel events of a trace file (KERNEL_META, one per node that recorded them): each
// node's stored header_page and event formats parsed (ftrace_format.hpp), one table of
// EventInfo entries over all nodes (an event of the same system, name and fields on two
// nodes is one entry, as identical call sites of two processes share an event id), and the
// decoding of one raw ftrace event into a Record's fields. Internal header.
//
// Every stored byte is untrusted: a format that does not parse leaves its event out; a
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
#include "reader/ftrace_format.hpp"

namespace nanotrace::reader {

class KernelTables {
 public:
  struct NodeMeta {
    uint32_t node = 0;  // the file's node index (0 in a file of one node)
    file::KernelMeta meta;
  };
  // Builds every node's tables; a node whose header_page or formats do not parse is left out,
  // with why appended to *left_out. Errors: kCorrupt when no node's tables build.
  static Result<std::shared_ptr<KernelTables>> build(std::vector<NodeMeta> nodes,
                                                     std::string* left_out);
  ~KernelTables();
  KernelTables(const KernelTables&) = delete;
  KernelTables& operator=(const KernelTables&) = delete;

  // The nodes whose tables built, by index k (0 <= k < node_count()).
  size_t node_count() const { return nodes_.size(); }
  // k of the file's node `node`, or -1 if it has no tables.
  int index_of(uint32_t node) const;
  uint32_t node(size_t k) const { return nodes_[k]->node; }
  const file::KernelMeta& meta(size_t k) const { return nodes_[k]->meta; }
  // Every node's events (EventInfo::id indexes it).
  const std::vector<EventInfo>& events() const { return events_; }
  // Size of the sub-buffer header (timestamp and commit words) before the events.
  uint32_t page_header_bytes(size_t k) const { return meta(k).long_size == 8 ? 16 : 12; }

  // Fills r's event, task and fields from one event's bytes of node k (size checked by the
  // caller); false if its type is not one of that node's stored formats. Texts the record
  // shows that are not in the event's bytes (arrays shown in hex) go to scratch.
  bool decode(size_t k, const uint8_t* data, uint32_t size, Record* r,
              std::array<std::string, abi::kMaxFields>* scratch) const;

 private:
  KernelTables() = default;
  struct Field {
    std::string name;
    uint32_t offset = 0;
    uint32_t size = 0;
    bool is_dynamic = false;   // a (length << 16 | offset) word locating the bytes
    bool is_relative = false;  // that offset counts from the end of the word
    bool is_char = false;      // char array or __data_loc char[]: shown as text
  };
  struct Event {
    std::vector<Field> fields;  // the shown ones, at most abi::kMaxFields
    uint32_t entry = 0;         // index into events_
  };
  struct Node {
    uint32_t node = 0;
    file::KernelMeta meta;
    std::vector<Event> decoders;
    std::unordered_map<uint32_t, uint32_t> by_type;  // ftrace event id -> index in decoders
    int pid_offset = -1;                             // common_pid
  };
  static Status parse_node(Node* n, std::vector<std::pair<EventInfo, Event>>* parsed);
  static std::pair<EventInfo, Event> event_of(const std::string& system,
                                              const FtraceFormat& format);
  static int common_pid_offset(const FtraceFormat& format);
  // The index into events_ of an entry equal to info (added if there is none).
  uint32_t entry_for(EventInfo info);

  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<EventInfo> events_;
};

}  // namespace nanotrace::reader
