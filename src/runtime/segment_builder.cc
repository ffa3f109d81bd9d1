// Creates and lays out a traced process's shared-memory segment (see nanotrace/abi.hpp for
// the layout), keeps its table region allocated as it fills, prepares rings, and appends
// strings to its pool.
//
// The segment is sparse: creating it allocates the header, group and thread tables only (a
// few tens of KiB, so start-up costs no work proportional to the event table or the rings).
// Everything else is allocated (fallocate) before it is first written, so a full /dev/shm is
// an error we see rather than a SIGBUS in the traced program.
#include <errno.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "base/process.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

constexpr uint32_t kEventsCapacity = 4096;
constexpr uint32_t kStringsCapacity = 256u << 10;
constexpr uint64_t kPage = 4096;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// The process's name: the main thread's, asked directly when this is the main thread (one
// system call; /proc/self/comm is three).
std::string read_comm(pid_t pid) {
  if (gettid() == pid) {
    char name[17] = {};
    if (prctl(PR_GET_NAME, name) == 0) return name;
  }
  std::string s = sys::read_proc_file("/proc/self/comm");
  return s.substr(0, s.find('\n'));
}

void copy_name(char* dst, size_t cap, const std::string& src) {
  size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

enum class Occupant {
  kNone,            // nothing there (any more)
  kEarlierImage,    // left by this process before it exec'd: removed
  kEarlierProcess,  // left by a dead process that had our pid: set aside as evidence
  kForeign,         // someone else's file, or a live runtime's: avoided
};

// Who this process is, beyond its pid.
struct ProcessIdentity {
  uint64_t start_time;  // proc_start_time: clock ticks, shared by processes of one tick
  uint64_t identity;    // pidfs inode, exact; 0 if the kernel has none
};

// True if a segment with these header values was written by this process (an earlier image
// of it), as far as can be told: by identity when both sides have one, else by start time.
bool same_process(const abi::SegmentHeader& h, const ProcessIdentity& self) {
  if (h.proc_identity != 0 && self.identity != 0) return h.proc_identity == self.identity;
  return self.start_time != 0 && h.proc_start_time == self.start_time;
}

// What occupies path, and that segment's start time and image id.
Occupant inspect(const std::string& path, pid_t pid, const ProcessIdentity& self,
                 uint64_t* old_start, uint64_t* old_image) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT ? Occupant::kNone : Occupant::kForeign;
  struct stat st;
  abi::SegmentHeader h{};
  bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
              ::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
              std::memcmp(h.magic, abi::kSegmentMagic, sizeof(h.magic)) == 0 &&
              h.pid == static_cast<uint32_t>(pid);
  bool live = ours && sys::segment_byte_locked(fd, sys::kWriterLockByte);
  ::close(fd);
  if (!ours || live) return Occupant::kForeign;
  *old_image = h.image_id;
  *old_start = h.proc_start_time;
  return same_process(h, self) ? Occupant::kEarlierImage : Occupant::kEarlierProcess;
}

// Renames path to aside, or, if that name is taken, to base.<random digits>; never replaces
// a file. False if it could not be moved.
bool move_aside(const std::string& path, const std::string& aside, const std::string& base,
                std::mt19937_64& rng) {
  for (int tries = 0; tries < 4; ++tries) {
    const std::string to =
        tries == 0 ? aside : base + "." + std::to_string(rng() % 100000000000000ull);
    if (to == path) continue;
    if (::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
      return true;
    }
    if (errno != EEXIST) return false;
  }
  return false;
}

// Opens a new segment file for pid: /dev/shm/nanotrace-<pid>, or, when that name is held by
// someone else (a live runtime, another user's file, anything that is not ours to remove),
// /dev/shm/nanotrace-<pid>.<start time>[<n>], which `nanotrace list` finds the same way.
// keep_earlier_image: a segment an earlier image of this process left (it exec'd) is set
// aside as /dev/shm/nanotrace-<pid>.<its image id> instead of removed (NANOTRACE_KEEP: a
// recorder that has not found it yet still can).
int open_new(pid_t pid, const ProcessIdentity& self, bool keep_earlier_image, std::string* path) {
  const std::string base = "/dev/shm/nanotrace-" + std::to_string(pid);
  std::mt19937_64 rng(self.start_time ^ self.identity ^ static_cast<uint64_t>(pid) ^
                      this_image_id());
  int name = 0;
  for (int tries = 0; tries < 16 && name < 6; ++tries) {
    *path = name == 0   ? base
            : name == 1 ? base + "." + std::to_string(self.start_time)
                        : base + "." + std::to_string(rng() % 100000000000000ull);
    int fd = ::open(path->c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
    uint64_t old_start = 0, old_image = 0;
    switch (inspect(*path, pid, self, &old_start, &old_image)) {
      case Occupant::kNone:  // vanished meanwhile: try the same name again
        break;
      case Occupant::kEarlierImage:
        if (!keep_earlier_image || old_image == 0 ||
            !move_aside(*path, base + "." + std::to_string(old_image), base, rng)) {
          ::unlink(path->c_str());
        }
        break;
      case Occupant::kEarlierProcess:
        // It may be the only record of a crash: move it aside, or leave it and take another
        // name, rather than replace it.
        if (old_start == 0 ||
            !move_aside(*path, base + "." + std::to_string(old_start), base, rng)) {
          ++name;
        }
        break;
      case Occupant::kForeign:
        ++name;
        break;
    }
  }
  errno = EEXIST;
  return -1;
}

}  // namespace

uint64_t this_image_id() {
  uint64_t id = 0;
  if (auto* random = reinterpret_cast<const void*>(getauxval(AT_RANDOM))) {
    std::memcpy(&id, random, sizeof(id));
  }
  return id | 1;  // never 0: 0 means "unknown" in a header
}

abi::ThreadSlot* Segment::slot(uint32_t i) const {
  return reinterpret_cast<abi::ThreadSlot*>(base + header()->threads_offset) + i;
}

uint64_t Segment::ring_offset(uint32_t i) const {
  return header()->rings_offset + static_cast<uint64_t>(i) * header()->ring_size;
}

uint8_t* Segment::ring(uint32_t i) const { return base + ring_offset(i); }

namespace {

// Where each region of a new segment starts, and its size.
struct Layout {
  uint32_t block;  // ring block size
  uint64_t groups_off, events_off, strings_off, threads_off, rings_off, size;
};

Layout layout_for(const Config& config) {
  Layout l;
  l.block = std::clamp<uint32_t>(config.ring_size / 16, 4096, 64u << 10);
  l.groups_off = sizeof(abi::SegmentHeader);
  l.events_off = l.groups_off + abi::kMaxGroups * sizeof(abi::GroupEntry);
  l.strings_off = l.events_off + kEventsCapacity * sizeof(abi::EventEntry);
  l.threads_off = align_up(l.strings_off + kStringsCapacity, 64);
  const uint64_t threads_end =
      l.threads_off + uint64_t{config.max_threads} * sizeof(abi::ThreadSlot);
  l.rings_off = align_up(threads_end, kPage);
  l.size = l.rings_off + uint64_t{config.max_threads} * config.ring_size;
  return l;
}

// Closes and removes a segment being created after `what` failed with errno.
Status abandon(int fd, const std::string& path, const char* what) {
  int err = errno;  // first: nothing before it may touch errno
  ::close(fd);
  ::unlink(path.c_str());
  return Status::FromErrno(std::string(what) + " " + path, err);
}

// Sizes the segment file and maps it into seg. Header and group table, the thread table
// (claimers read every slot) and the first block of the first ring (which follows it: one
// call) are allocated now; event table and string pool as they fill (reserve_table_bytes);
// the other rings when a thread is about to use one (prepare_ring). The first block: the
// first thread to trace, often the only one, finds its memory ready (its first event took
// 30-50 us allocating and faulting it in here).
Status allocate_and_map(int fd, const Layout& l, Segment* seg) {
  seg->fd = fd;
  if (!note_segment_identity(seg)) return abandon(fd, seg->path, "fstat");
  uint64_t threads_page = l.threads_off & ~(kPage - 1);
  if (ftruncate(fd, static_cast<off_t>(l.size)) != 0 ||
      posix_fallocate(fd, 0, static_cast<off_t>(align_up(l.events_off, kPage))) != 0 ||
      posix_fallocate(fd, static_cast<off_t>(threads_page),
                      static_cast<off_t>(l.rings_off + l.block - threads_page)) != 0) {
    return abandon(fd, seg->path, "sizing");
  }
  void* base = mmap(nullptr, l.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return abandon(fd, seg->path, "mmap");
  seg->base = static_cast<uint8_t*>(base);
  seg->size = l.size;
  seg->table_pages.assign(align_up(l.events_off, kPage) / kPage, true);  // allocated above
  // The pages written next: the header, the first groups and events, the first thread slots.
  map_for_writing(*seg, 0, l.events_off + sizeof(abi::EventEntry));
  map_for_writing(*seg, l.threads_off, sizeof(abi::ThreadSlot));
  map_for_writing(*seg, l.rings_off, kPage);
  seg->slot(0)->allocated_blocks = 1;  // allocated above
  return Status::Ok();
}

// Fills the header of a new segment; its version goes last, so a reader that sees it sees a
// complete header.
void write_header(const Segment& seg, const Layout& l, const Config& config, pid_t pid,
                  const ProcessIdentity& self) {
  abi::SegmentHeader* h = seg.header();
  std::memcpy(h->magic, abi::kSegmentMagic, sizeof(h->magic));
  h->header_size = sizeof(abi::SegmentHeader);
  h->segment_size = l.size;
  h->pid = static_cast<uint32_t>(pid);
  h->state = static_cast<uint32_t>(abi::ProcessState::kRunning);
  h->mode = static_cast<uint32_t>(config.mode);
  auto kind = (config.force_monotonic || !sys::tsc_is_invariant()) ? abi::ClockKind::kMonotonic
                                                                   : abi::ClockKind::kTsc;
  h->clock_kind = static_cast<uint32_t>(kind);
  // The rate is measured from clock pairs as the process runs (refresh_clock); a reader of a
  // very young process measures it against the start pair itself.
  h->ticks_per_second = kind == abi::ClockKind::kMonotonic ? 1000000000ull : 0;
  h->clock_start = sample_clock_pair(kind);
  h->clock_latest = h->clock_start;
  h->ring_size = config.ring_size;
  h->block_size = l.block;
  h->max_threads = config.max_threads;
  h->groups_offset = l.groups_off;
  h->events_offset = l.events_off;
  h->events_capacity = kEventsCapacity;
  h->strings_offset = l.strings_off;
  h->strings_capacity = kStringsCapacity;
  h->strings_used = 1;  // offset 0 is the empty string
  h->threads_offset = l.threads_off;
  h->rings_offset = l.rings_off;
  h->block_timeout_ns = config.block_timeout_ns;
  h->image_id = this_image_id();
  h->runtime_api = reinterpret_cast<uint64_t>(&g_this_api);
  copy_name(h->process_name, sizeof(h->process_name), read_comm(pid));
  copy_name(h->user_name, sizeof(h->user_name), config.name);
  h->proc_start_time = self.start_time;
  h->proc_identity = self.identity;
  h->run_id = config.run_id;
  h->parent_pid = static_cast<uint32_t>(getppid());
  __atomic_store_n(&h->version, abi::kSegmentVersion, __ATOMIC_RELEASE);
}

}  // namespace

Result<Segment> create_segment(const Config& config, pid_t pid) {
  Segment seg;
  const ProcessIdentity self{sys::proc_start_time(static_cast<uint32_t>(pid)),
                             sys::process_identity(static_cast<uint32_t>(pid))};
  int fd = open_new(pid, self, config.keep_on_exit, &seg.path);
  if (fd < 0) return Status::FromErrno("creating /dev/shm/nanotrace-" + std::to_string(pid), errno);
  fchmod(fd, 0600);  // umask can only narrow, but be explicit
  if (!sys::lock_segment_byte(fd, sys::kWriterLockByte)) return abandon(fd, seg.path, "locking");
  const Layout layout = layout_for(config);
  if (Status s = allocate_and_map(fd, layout, &seg); !s.ok()) return s;
  write_header(seg, layout, config, pid, self);
  return seg;
}

bool reserve_table_bytes(Segment* seg, uint64_t begin, uint64_t end) {
  if (end <= begin) return true;
  const uint64_t first = begin / kPage, last = (end - 1) / kPage;
  if (seg->table_pages.size() <= last) seg->table_pages.resize(last + 1, false);
  uint64_t from = first;
  while (from <= last && seg->table_pages[from]) ++from;
  if (from > last) return true;
  uint64_t to = last;
  while (seg->table_pages[to]) --to;
  if (!reclaim_segment_fd(seg)) return false;
  // One call for the pages not yet allocated (any allocated among them stay as they are).
  if (posix_fallocate(seg->fd, static_cast<off_t>(from * kPage),
                      static_cast<off_t>((to - from + 1) * kPage)) != 0) {
    return false;
  }
  for (uint64_t p = from; p <= to; ++p) seg->table_pages[p] = true;
  map_for_writing(*seg, begin, end - begin);
  return true;
}

void map_for_writing(const Segment& seg, uint64_t offset, uint64_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const uint64_t first = offset & ~(kPage - 1);
  (void)madvise(seg.base + first, align_up(offset + bytes, kPage) - first, MADV_POPULATE_WRITE);
#else
  (void)seg, (void)offset, (void)bytes;
#endif
}

// Maps the first page of ring i ahead of its writer, so that a thread's first record does not
// pay the page fault of the ring's first touch: most of a first event's cost in a VM (first
// events 19-20 us median before, 5.8 us after, hiccups under load). madvise fills the
// process's page tables; a hypervisor that shadows them fills its own only on an access, so
// the page is also read. Nothing is written, since a writer may claim the slot meanwhile (the
// value read is dropped). One page only: each costs several microseconds here, and the control
// thread must keep up with a burst of new threads. Thread-sanitizer builds skip the read,
// which it would report against such a writer.
void map_first_page(const Segment& seg, uint32_t i) {
  const uint64_t ring = seg.ring_offset(i);
  map_for_writing(seg, ring, kPage);
#ifndef __SANITIZE_THREAD__
  uint8_t seen = __atomic_load_n(seg.base + ring, __ATOMIC_RELAXED);
  __asm__ volatile("" : : "r"(seen));
#endif
}

// A block at a time: fallocate holds the file's lock for its whole range, and a writer that
// allocates a block of its own ring meanwhile waits for it (a whole 1 MiB ring takes about
// 1 ms where the host backs fresh guest memory at 3.4 us a page).
bool prepare_ring(const Segment& seg, uint32_t i) {
  abi::ThreadSlot* s = seg.slot(i);
  if (__atomic_load_n(&s->prepared, __ATOMIC_ACQUIRE) != 0) return true;
  if (!segment_fd_is_ours(seg)) return false;
  abi::SegmentHeader* h = seg.header();
  for (uint64_t at = 0; at < h->ring_size; at += h->block_size) {
    const uint64_t bytes = std::min<uint64_t>(h->block_size, h->ring_size - at);
    if (posix_fallocate(seg.fd, static_cast<off_t>(seg.ring_offset(i) + at),
                        static_cast<off_t>(bytes)) != 0) {
      return false;
    }
  }
  map_first_page(seg, i);
  __atomic_store_n(&s->prepared, 1, __ATOMIC_RELEASE);
  return true;
}

bool prepare_first_block(const Segment& seg, uint32_t i) {
  abi::ThreadSlot* s = seg.slot(i);
  if (__atomic_load_n(&s->allocated_blocks, __ATOMIC_ACQUIRE) != 0) return true;
  if (!segment_fd_is_ours(seg)) return false;
  if (posix_fallocate(seg.fd, static_cast<off_t>(seg.ring_offset(i)),
                      static_cast<off_t>(seg.header()->block_size)) != 0) {
    return false;
  }
  map_first_page(seg, i);
  // A writer that claimed the slot meanwhile may have gone further: never move it back.
  uint32_t none = 0;
  __atomic_compare_exchange_n(&s->allocated_blocks, &none, 1, false, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
  return true;
}

uint32_t intern_string(Segment& seg, const char* text) {
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
  const uint64_t at = h->strings_offset + off;
  if (!reserve_table_bytes(&seg, at, at + n + 1)) return 0;
  std::memcpy(pool + off, text, n + 1);
  __atomic_store_n(&h->strings_used, off + static_cast<uint32_t>(n) + 1, __ATOMIC_RELEASE);
  return off;
}

}  // namespace nanotrace::runtime
