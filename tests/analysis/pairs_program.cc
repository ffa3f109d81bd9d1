// A traced program whose begin/end pairs exercise every case of the interval matcher: pairs
// keyed by an integer and by strings of every length (empty, exactly 8 bytes, long), begins
// and ends on different threads, repeated keys (a begin replacing an open one, on one thread
// whatever the scheduling, and across threads as they interleave), ends without
// a begin, one event name at several call sites (one of them with another field layout), a
// key that is a string in the begin event and an integer in the end event, and records of
// another event in between. Run with a small NANOTRACE_BUFFER to lose records.
//
//   pairs_program [--rounds N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

// Key text of id: lengths 0 to 11, so some are 8 bytes; repeats every 600 ids.
std::string name_of(uint64_t id) {
  std::string s = std::to_string(id % 600);
  s.resize(id % 12, 'x');
  return s;
}

void begin(uint64_t id) {
  const char* devs[] = {"sda", "sdb", "nvme0n1"};
  const std::string name = name_of(id);
  if (id % 7 == 0) {
    NANOTRACE(pair, begin, "id={} name={} dev={}", id, name.c_str(), devs[id % 3]);
  } else {
    NANOTRACE(pair, begin, "id={} name={} dev={}", id, name.c_str(), devs[id % 2]);
  }
  NANOTRACE(noise, tick, "n={}", id);
}

void end(uint64_t id) {
  const std::string name = name_of(id);
  if (id % 5 == 0) {
    NANOTRACE(pair, end, "id={} name={} status={}", id, name.c_str(), -1.5);  // another layout
  } else {
    NANOTRACE(pair, end, "id={} name={} status={}", id, name.c_str(), int32_t{0});
  }
}

// mix:begin's key is 8 bytes of text, mix:end's the integer with the same bytes (or text).
void mixed(uint64_t i) {
  char text[9];
  std::snprintf(text, sizeof text, "k%07llu", static_cast<unsigned long long>(i % 1000));
  NANOTRACE(mix, begin, "k={}", static_cast<const char*>(text));
  uint64_t word;
  std::memcpy(&word, text, 8);
  if (i % 3 == 0) {
    NANOTRACE(mix, end, "k={}", static_cast<const char*>(text));
  } else {
    NANOTRACE(mix, end, "k={}", word);
  }
}

// Begins ids [first, first + n) eight at a time and ends each round in reverse order, some
// rounds on another thread (few: a thread takes a slot of its own).
void pairs(uint64_t first, uint64_t n) {
  for (uint64_t base = 0; base < n; base += 8) {
    const uint64_t count = n - base < 8 ? n - base : 8;
    for (uint64_t i = 0; i < count; ++i) begin(first + base + i);
    auto finish = [&] {
      for (uint64_t i = count; i-- > 0;) end(first + base + i);
    };
    if (base % 512 == 0) {
      std::thread(finish).join();
    } else {
      finish();
    }
    mixed(first + base);
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t rounds = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) {
      rounds = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: pairs_program [--rounds N]\n");
      return 2;
    }
  }
  std::printf("pairs_program pid %d segment %s\n", getpid(), nanotrace::segment_path().c_str());
  std::fflush(stdout);
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 3; ++t) threads.emplace_back(pairs, t * 10000000, rounds * 8);
  for (std::thread& t : threads) t.join();
  // Two begins of one name (""), each ended by its id: by name the first is replaced, whatever
  // the threads' interleaving did (their repeated names meet only when they run at once).
  begin(70000008);
  begin(70000020);
  end(70000020);
  end(70000008);
  for (uint64_t i = 0; i < 20; ++i) begin(90000000 + i);  // never ended
  for (uint64_t i = 0; i < 20; ++i) end(80000000 + i);    // never begun
  return 0;
}
