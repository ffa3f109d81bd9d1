// A traced test program with known content for the export tests: one record of every field
// type (test:types, with field names CTF must sanitise), an event without fields, and
// test:begin/test:end pairs keyed by id, overlapping (several open at once, ended in another
// order, some on another thread), plus begins that never end and ends that never began.
// --mixed-widths 1 adds events that share a field name, v, in different integer types
// (test:narrow u8, test:wide i32, test:huge u64 above 2^63, test:negative i64).
//
//   export_helper [--pairs N] [--unmatched-begins N] [--unmatched-ends N] [--mixed-widths 1]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <thread>
#include <vector>

namespace {

void spin_ns(uint64_t ns) {
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Begins `count` pairs with ids from `first`, eight at a time, ending each round in reverse
// order. The last round ends on another thread.
void pairs(uint64_t first, uint64_t count) {
  const char* devs[] = {"sda", "sdb", "nvme0n1"};
  for (uint64_t base = 0; base < count; base += 8) {
    uint64_t n = count - base < 8 ? count - base : 8;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t id = first + base + i;
      NANOTRACE(test, begin, "id={} dev={}", id, devs[id % 3]);
      spin_ns(50 * (id % 13));
    }
    auto finish = [&] {
      for (uint64_t i = n; i-- > 0;) {
        uint64_t id = first + base + i;
        NANOTRACE(test, end, "id={} status={}", id, static_cast<int32_t>(id % 5) - 2);
      }
    };
    if (base + 8 >= count) {
      std::thread(finish).join();
    } else {
      finish();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t count = 1000, unmatched_begins = 7, unmatched_ends = 3, mixed_widths = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--pairs")) {
      count = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--unmatched-begins")) {
      unmatched_begins = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--unmatched-ends")) {
      unmatched_ends = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--mixed-widths")) {
      mixed_widths = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: export_helper [--pairs N] [--unmatched-begins N] "
                   "[--unmatched-ends N] [--mixed-widths 1]\n");
      return 2;
    }
  }
  std::printf("export_helper pid %d segment %s\n", getpid(), nanotrace::segment_path().c_str());
  std::fflush(stdout);
  NANOTRACE(test, types,
            "i8={} i16={} i32={} i64={} u8={} u16={} u32={} u64={} f32={} f64={} flag={} "
            "name={} ptr={} event={} a.b={}",
            int8_t{-5}, int16_t{-300}, int32_t{-70000}, int64_t{-5000000000}, uint8_t{200},
            uint16_t{60000}, uint32_t{4000000000u}, uint64_t{18000000000000000000ull}, 1.5f, -2.25,
            true, "hello world", reinterpret_cast<void*>(0x1234), 7, 9);
  NANOTRACE(test, empty, "no fields");
  // String slots next to each other, after a small integer, empty, full (63 bytes) and last.
  NANOTRACE(test, strings, "first={} second={} small={} last={}", "",
            "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_", uint8_t{3}, "tail");
  if (mixed_widths != 0) {
    NANOTRACE(test, narrow, "v={}", uint8_t{200});
    NANOTRACE(test, wide, "v={}", int32_t{-70000});
    NANOTRACE(test, huge, "v={}", uint64_t{(1ull << 63) + 1});
    NANOTRACE(test, negative, "v={}", int64_t{-1});
  }
  std::thread other([&] { pairs(1000000, count / 2); });
  pairs(0, count - count / 2);
  other.join();
  for (uint64_t i = 0; i < unmatched_begins; ++i) {
    NANOTRACE(test, begin, "id={} dev={}", 5000000 + i, "sda");
  }
  for (uint64_t i = 0; i < unmatched_ends; ++i) {
    NANOTRACE(test, end, "id={} status={}", 6000000 + i, int32_t{0});
  }
  return 0;
}
