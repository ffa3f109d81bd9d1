// The start-up floor of the start-up benchmark (hiccups.cc): the trivial program of
// startup_twin.cc plus, written plainly and without the library, the least that any tracer
// keeping its buffers in a shared-memory file and answering controllers from a thread of
// its own must do at start-up: create the file (mode 0600, never an existing one), size it,
// allocate and map it, write one page of metadata and one of records, start the thread, and
// remove the file at exit. What the traced twin costs beyond this is the runtime's own.
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kSize = 256ull << 20;  // as the default segment: 256 rings of 1 MiB
constexpr uint64_t kRecordsAt = 1ull << 20;

uint32_t g_wake = 0;

void* control(void*) {
  syscall(SYS_futex, &g_wake, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
  return nullptr;
}

}  // namespace

int main(int argc, char**) {
  char path[64];
  std::snprintf(path, sizeof(path), "/dev/shm/nanotrace-floor-%d", static_cast<int>(getpid()));
  const int fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return 3;
  if (ftruncate(fd, kSize) != 0 || fallocate(fd, 0, 0, kPage) != 0 ||
      fallocate(fd, 0, kRecordsAt, kPage) != 0) {
    unlink(path);
    return 3;
  }
  void* mapped = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) {
    unlink(path);
    return 3;
  }
  auto* base = static_cast<uint8_t*>(mapped);
  const uint64_t n = static_cast<uint64_t>(argc);
  std::memcpy(base, "floor", 6);                  // the metadata page
  std::memcpy(base + kRecordsAt, &n, sizeof(n));  // the records page
  pthread_t thread;
  if (pthread_create(&thread, nullptr, control, nullptr) != 0) return 3;
  unlink(path);
  return n > 100 ? 1 : 0;
}
