// Test helper: reads test:rec records (see tests/runtime/producer.cc) out of a trace and
// verifies each one's checksum.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::testing {

struct TestRecord {
  uint64_t thread, seq, value, check;
  uint64_t record_seq;  // the reader's per-thread sequence number
  uint64_t ticks;
  uint32_t stream;  // index into the source's thread list
};

inline uint64_t producer_checksum(uint64_t thread, uint64_t seq, uint64_t value) {
  uint64_t x = thread * 0x9e3779b97f4a7c15ull ^ seq * 0xbf58476d1ce4e5b9ull ^ value;
  x ^= x >> 31;
  return x * 0x94d049bb133111ebull;
}

struct ReadResult {
  std::vector<TestRecord> records;
  std::vector<ThreadStats> threads;
  uint64_t bad_checksums = 0;
  uint64_t other_events = 0;
};

inline ReadResult read_test_records(Trace& trace, bool consume = false) {
  ReadResult out;
  auto source = trace.read_all(consume);
  Record r;
  while (source->next(&r)) {
    if (r.event->full_name() != "test:rec" || r.field_count != 4) {
      ++out.other_events;
      continue;
    }
    TestRecord t{r.values[0].bits, r.values[1].bits, r.values[2].bits, r.values[3].bits, r.seq,
                 r.ticks,          r.thread};
    if (t.check != producer_checksum(t.thread, t.seq, t.value) || t.value != t.seq * 7 + t.thread) {
      ++out.bad_checksums;
    }
    out.records.push_back(t);
  }
  out.threads = source->threads();
  return out;
}

}  // namespace nanotrace::testing
