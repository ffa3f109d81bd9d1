// One traced process of top_bench: operations io:submit/io:complete (16 in flight at a time,
// one that never ends) at the rate of operations per second written in a level file, which
// the bench changes between frames. Exits when its stdin closes.
//
//   top_producer LEVEL_FILE
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nanotrace/nanotrace.hpp>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 2;
  auto* level =
      static_cast<const std::atomic<uint32_t>*>(mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0));
  if (level == MAP_FAILED) return 2;
  NANOTRACE(io, submit, "req={} len={}", uint64_t{~0ull}, uint64_t{4096});  // never ends
  constexpr uint64_t kInFlight = 16;
  uint64_t req = 0;
  double owed = 0;
  auto last = std::chrono::steady_clock::now();
  std::printf("ready\n");
  std::fflush(stdout);
  pollfd in{0, POLLIN, 0};
  for (;;) {
    if (poll(&in, 1, 0) > 0) break;  // stdin closed (or written to): stop
    const auto now = std::chrono::steady_clock::now();
    owed +=
        std::chrono::duration<double>(now - last).count() * level->load(std::memory_order_relaxed);
    last = now;
    for (; owed >= 1; owed -= 1, ++req) {
      NANOTRACE(io, submit, "req={} len={}", req, uint64_t{4096});
      if (req >= kInFlight) NANOTRACE(io, complete, "req={} status={}", req - kInFlight, 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return 0;
}
