// Raw access to a Trace's mapping for code of this library that works on the segment's
// bytes (the recorder, the controller) and for tests that check those bytes. Internal header:
// everything else reads through the Trace API.
#pragma once

#include <cstdint>

#include "base/node_meta.hpp"
#include "nanotrace/abi.hpp"
#include "nanotrace/reader.hpp"
#include "reader/trace_file.hpp"

namespace nanotrace::reader {

struct TraceInternals {
  // The mapped segment (or the trace file's header copy).
  static const uint8_t* base(const Trace& t) { return t.base(); }
  // The mapping, writable; nullptr unless the trace was opened writable.
  static uint8_t* writable_base(const Trace& t) { return t.writable_base(); }
  // The segment's or trace file's descriptor.
  static int fd(const Trace& t) { return t.fd(); }
  // The trace file's index, or null for a segment.
  static const TraceFile* file(const Trace& t) { return t.file_.get(); }
  // Process `process` (index into processes()) of a multi-process trace file: its own event
  // table, and the map from its event ids to the trace's (empty: the same ids).
  static const std::vector<EventInfo>& local_events(const Trace& t, uint32_t process) {
    return process < t.local_events_.size() ? t.local_events_[process] : t.events_;
  }
  static const std::vector<uint16_t>& id_map(const Trace& t, uint32_t process) {
    static const std::vector<uint16_t> kSame;
    return process < t.id_maps_.size() ? t.id_maps_[process] : kSame;
  }
  // The node whose CPU Trace::read_kernel_cpu(c) reads (0 in a file of one node).
  static uint32_t kernel_cpu_node(const Trace& t, uint32_t c) {
    return t.file_ && c < t.file_->kernel_data.size() ? t.file_->kernel_data[c].node : 0;
  }
  // How the clock of process `process`'s node maps onto the trace's, or null when its clock
  // is the trace's (one node, the reference node, or one sharing its clock).
  static const file::NodePayload* clock_alignment(const Trace& t, uint32_t process) {
    if (!t.file_ || process >= t.file_->process_node.size()) return nullptr;
    const file::NodePayload& n = t.file_->nodes[t.file_->process_node[process]];
    return file::aligned_identity(n) ? nullptr : &n;
  }
};

// The trigger facts of a (validated, private) copy of a segment header.
TriggerInfo trigger_info(const abi::SegmentHeader& header);

}  // namespace nanotrace::reader
