// The nanotrace side of tail_timing.hpp's probe: the events hiccups.cc and tail_twin.cc time,
// and where the thread's ring stands, read from the runtime's own slot.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <nanotrace/nanotrace.hpp>
#include <nanotrace/reader.hpp>

namespace bench {

struct NanotraceProbe {
  void first(uint64_t thread) { NANOTRACE(hiccup, first, "thread={}", thread); }
  void event(uint64_t a, uint64_t b) { NANOTRACE(hiccup, ev, "a={} b={}", a, b); }
  // The block and ring sizes from the process's own segment, and this thread's slot.
  void attach() {
    auto trace = nanotrace::Trace::open_pid(getpid());
    block = trace.ok() ? (*trace)->process().block_size : 0;
    ring = trace.ok() ? (*trace)->process().ring_size : 0;
    slot = nanotrace::detail::t_writer.slot;
  }
  uint64_t head() const { return slot ? __atomic_load_n(&slot->head, __ATOMIC_RELAXED) : 0; }

  const nanotrace::abi::ThreadSlot* slot = nullptr;
  uint64_t block = 0, ring = 0;
};

}  // namespace bench
