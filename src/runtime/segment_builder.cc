// Creates and lays out a traced process's shared-memory segment (see nanotrace/abi.hpp for
// the layout) and appends strings to its pool.
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "common/process.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

constexpr uint32_t kEventsCapacity = 4096;
constexpr uint32_t kStringsCapacity = 256u << 10;
constexpr uint64_t kPage = 4096;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

std::string read_comm() {
  std::ifstream in("/proc/self/comm");
  std::string s;
  std::getline(in, s);
  return s;
}

void copy_name(char* dst, size_t cap, const std::string& src) {
  size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// Renames /dev/shm/nanotrace-<pid> to nanotrace-<pid>.<start time of its process>, or
// removes it if it cannot be renamed (or holds nothing worth keeping).
void set_aside_stale_segment(pid_t pid) {
  std::string path = "/dev/shm/nanotrace-" + std::to_string(pid);
  uint64_t start_time = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    abi::SegmentHeader h{};
    if (::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
        std::memcmp(h.magic, abi::kSegmentMagic, sizeof(h.magic)) == 0 &&
        h.pid == static_cast<uint32_t>(pid)) {
      start_time = h.proc_start_time;
    }
    ::close(fd);
  }
  if (start_time != 0) {
    std::string aside = path + "." + std::to_string(start_time);
    if (::rename(path.c_str(), aside.c_str()) == 0) return;
  }
  ::unlink(path.c_str());
}

}  // namespace

abi::ThreadSlot* Segment::slot(uint32_t i) const {
  return reinterpret_cast<abi::ThreadSlot*>(base + header()->threads_offset) + i;
}

uint8_t* Segment::ring(uint32_t i) const {
  return base + header()->rings_offset + static_cast<uint64_t>(i) * header()->ring_size;
}

Result<Segment> create_segment(const Config& config, pid_t pid) {
  Segment seg;
  seg.name = "/nanotrace-" + std::to_string(pid);
  int fd = shm_open(seg.name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    // A segment left by an earlier process that had our pid (it is dead: pids are unique
    // among live processes). It may be the only record of a crash, so it is moved aside
    // rather than replaced; `nanotrace list`, `recover` and `clean` know the new name.
    set_aside_stale_segment(pid);
    fd = shm_open(seg.name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  }
  if (fd < 0) return Status::FromErrno("shm_open " + seg.name, errno);
  fchmod(fd, 0600);  // umask can only narrow, but be explicit

  uint32_t block = config.ring_size / 16;
  if (block < 4096) block = 4096;
  if (block > (64u << 10)) block = 64u << 10;

  uint64_t groups_off = sizeof(abi::SegmentHeader);
  uint64_t events_off = groups_off + abi::kMaxGroups * sizeof(abi::GroupEntry);
  uint64_t strings_off = events_off + kEventsCapacity * sizeof(abi::EventEntry);
  uint64_t threads_off = align_up(strings_off + kStringsCapacity, 64);
  uint64_t rings_off =
      align_up(threads_off + uint64_t{config.max_threads} * sizeof(abi::ThreadSlot), kPage);
  uint64_t size = rings_off + uint64_t{config.max_threads} * config.ring_size;

  // Rings stay sparse until a thread claims one (claim_ring fallocates it, so a full
  // /dev/shm is an error at claim time rather than a SIGBUS in the hot path).
  if (ftruncate(fd, static_cast<off_t>(rings_off)) != 0 ||
      posix_fallocate(fd, 0, static_cast<off_t>(rings_off)) != 0 ||
      ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(seg.name.c_str());
    return Status::FromErrno("sizing " + seg.name, err);
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    close(fd);
    shm_unlink(seg.name.c_str());
    return Status::FromErrno("mmap " + seg.name, err);
  }
  seg.fd = fd;
  seg.base = static_cast<uint8_t*>(base);
  seg.size = size;

  abi::SegmentHeader* h = seg.header();
  std::memcpy(h->magic, abi::kSegmentMagic, sizeof(h->magic));
  h->header_size = sizeof(abi::SegmentHeader);
  h->segment_size = size;
  h->pid = static_cast<uint32_t>(pid);
  h->state = static_cast<uint32_t>(abi::ProcessState::kRunning);
  h->mode = static_cast<uint32_t>(config.mode);
  auto kind = (config.force_monotonic || !tsc_is_invariant()) ? abi::ClockKind::kMonotonic
                                                              : abi::ClockKind::kTsc;
  h->clock_kind = static_cast<uint32_t>(kind);
  h->ticks_per_second = estimate_ticks_per_second(kind);
  h->clock_start = sample_clock_pair(kind);
  h->clock_latest = h->clock_start;
  h->ring_size = config.ring_size;
  h->block_size = block;
  h->max_threads = config.max_threads;
  h->groups_offset = groups_off;
  h->events_offset = events_off;
  h->events_capacity = kEventsCapacity;
  h->strings_offset = strings_off;
  h->strings_capacity = kStringsCapacity;
  h->strings_used = 1;  // offset 0 is the empty string
  h->threads_offset = threads_off;
  h->rings_offset = rings_off;
  copy_name(h->process_name, sizeof(h->process_name), read_comm());
  copy_name(h->user_name, sizeof(h->user_name), config.name);
  h->proc_start_time = sys::proc_start_time(static_cast<uint32_t>(pid));
  // The version goes last: a reader that sees it sees a complete header.
  __atomic_store_n(&h->version, abi::kSegmentVersion, __ATOMIC_RELEASE);
  return seg;
}

void destroy_segment(Segment* seg, bool unlink) {
  if (seg->base) munmap(seg->base, seg->size);
  if (seg->fd >= 0) close(seg->fd);
  if (unlink && !seg->name.empty()) shm_unlink(seg->name.c_str());
  *seg = Segment();
}

uint32_t intern_string(const Segment& seg, const char* text) {
  abi::SegmentHeader* h = seg.header();
  if (text == nullptr || text[0] == '\0') return 0;
  size_t n = std::strlen(text);
  char* pool = reinterpret_cast<char*>(seg.base + h->strings_offset);
  // Reuse an identical string (file names and groups repeat a lot).
  for (uint32_t off = 1; off < h->strings_used;) {
    size_t len = std::strlen(pool + off);
    if (len == n && std::memcmp(pool + off, text, n) == 0) return off;
    off += static_cast<uint32_t>(len) + 1;
  }
  if (h->strings_used + n + 1 > h->strings_capacity) return 0;  // pool full: name shown empty
  uint32_t off = h->strings_used;
  std::memcpy(pool + off, text, n + 1);
  __atomic_store_n(&h->strings_used, off + static_cast<uint32_t>(n) + 1, __ATOMIC_RELEASE);
  return off;
}

}  // namespace nanotrace::runtime
