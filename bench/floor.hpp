// The physical floor of a tracepoint, measured in the same run as what it is compared with:
// reading the time stamp counter plus one 32-byte store into a per-thread ring array. Event
// cost / floor is the figure nanotrace's benchmarks report, because absolute nanoseconds on
// a shared machine change with its clock state from one second to the next.
//
// Thread safety: FloorRing is per thread; floor_step may run on many threads at once.
#pragma once

#include <x86intrin.h>

#include <cstddef>
#include <cstdint>

namespace nanotrace {

// A 64 KiB ring of 32-byte slots, cache resident like a tracer's current block.
struct alignas(64) FloorRing {
  static constexpr std::size_t kSlots = 2048;
  struct Slot {
    uint64_t words[4];
  };
  Slot slots[kSlots];
  std::size_t next = 0;
};

// One floor operation: rdtsc, then a 32-byte record (time, id, two values) into the ring.
[[gnu::always_inline]] inline void floor_step(FloorRing& ring, uint64_t a, uint64_t b) {
  FloorRing::Slot& s = ring.slots[ring.next & (FloorRing::kSlots - 1)];
  s.words[0] = __rdtsc();
  s.words[1] = 7;
  s.words[2] = a;
  s.words[3] = b;
  ring.next = ring.next + 1;
  asm volatile("" ::: "memory");
}

}  // namespace nanotrace
