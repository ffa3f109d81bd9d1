// The drainer's META chunks: a compact copy of the segment's table region (see drainer.hpp),
// written first, whenever events, strings or group states change, and last. The check for a
// change reads a few counters and the group enable bytes, so it can run on every pass.
#include <cstring>

#include "reader/trace_internals.hpp"
#include "record/drainer.hpp"

namespace nanotrace::rec {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

struct TableCounts {
  uint32_t events, strings, groups;
};

TableCounts table_counts(const abi::SegmentHeader* live) {
  TableCounts c;
  c.events = __atomic_load_n(&live->events_count, __ATOMIC_ACQUIRE);
  c.strings = __atomic_load_n(&live->strings_used, __ATOMIC_ACQUIRE);
  c.groups = __atomic_load_n(&live->groups_count, __ATOMIC_ACQUIRE);
  if (c.events > live->events_capacity) c.events = live->events_capacity;
  if (c.strings > live->strings_capacity) c.strings = live->strings_capacity;
  if (c.groups > abi::kMaxGroups) c.groups = abi::kMaxGroups;
  return c;
}

// Changes whenever what a META chunk holds changes, clock calibration aside.
uint64_t table_signature(const uint8_t* base, const TableCounts& c) {
  auto* live = reinterpret_cast<const abi::SegmentHeader*>(base);
  uint64_t s = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { s = (s ^ v) * 1099511628211ull; };
  mix(c.events);
  mix(c.strings);
  mix(c.groups);
  auto* g = reinterpret_cast<const abi::GroupEntry*>(base + live->groups_offset);
  for (uint32_t i = 0; i < c.groups; ++i) mix(__atomic_load_n(&g[i].enabled, __ATOMIC_RELAXED));
  return s;
}

// Header, group table, the events published so far and the used part of the string pool,
// with offsets rewritten to this layout.
void build_meta(const uint8_t* base, const TableCounts& c, std::vector<uint8_t>* out) {
  auto* live = reinterpret_cast<const abi::SegmentHeader*>(base);
  abi::SegmentHeader h;
  std::memcpy(&h, base, sizeof(h));
  // clock_latest under its seqlock.
  for (int i = 0; i < 100; ++i) {
    uint32_t a = __atomic_load_n(&live->clock_seq, __ATOMIC_ACQUIRE);
    abi::ClockPair pair = live->clock_latest;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if ((a & 1) == 0 && __atomic_load_n(&live->clock_seq, __ATOMIC_RELAXED) == a) {
      h.clock_latest = pair;
      break;
    }
    h.clock_latest = h.clock_start;
  }
  h.clock_seq = 0;
  h.lost_no_slot = __atomic_load_n(&live->lost_no_slot, __ATOMIC_RELAXED);
  h.lost_reclaimed = __atomic_load_n(&live->lost_reclaimed, __ATOMIC_RELAXED);
  uint64_t groups_off = sizeof(abi::SegmentHeader);
  uint64_t events_off = groups_off + abi::kMaxGroups * sizeof(abi::GroupEntry);
  uint64_t strings_off = events_off + uint64_t{c.events} * sizeof(abi::EventEntry);
  uint64_t end = align_up(strings_off + c.strings, 64);
  out->assign(end, 0);
  std::memcpy(out->data() + groups_off, base + h.groups_offset,
              abi::kMaxGroups * sizeof(abi::GroupEntry));
  std::memcpy(out->data() + events_off, base + h.events_offset,
              uint64_t{c.events} * sizeof(abi::EventEntry));
  std::memcpy(out->data() + strings_off, base + h.strings_offset, c.strings);
  h.groups_offset = groups_off;
  h.groups_count = c.groups;
  h.events_offset = events_off;
  h.events_capacity = c.events;
  h.events_count = c.events;
  h.strings_offset = strings_off;
  h.strings_capacity = c.strings;
  h.strings_used = c.strings;
  h.threads_offset = end;
  h.rings_offset = end;
  h.segment_size = end;
  h.consumer_pid = 0;
  std::memcpy(out->data(), &h, sizeof(h));
}

}  // namespace

Status Drainer::write_meta(bool force) {
  TableCounts c = table_counts(header_);
  uint64_t sig = table_signature(reader::TraceInternals::base(trace_), c);
  if (!force && sig == meta_sig_) return Status::Ok();
  std::vector<uint8_t> meta;
  build_meta(reader::TraceInternals::base(trace_), c, &meta);
  meta_sig_ = sig;
  meta_events_ = c.events;
  struct iovec v = {meta.data(), meta.size()};
  return out_.write_chunk(file::ChunkType::kMeta, process_tag_, 0, 0, &v, 1);
}

}  // namespace nanotrace::rec
