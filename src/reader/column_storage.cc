// ColumnStorage (nanotrace/columns.hpp): a column's bytes in an anonymous mapping of its own.
//
// Memory the process has not touched yet dominates the cost of filling columns on a VM: the
// first write to each fresh 4 KiB page costs 2 to 40 us (a fault, and the hypervisor's own
// page tables), more than the values written to it; a 2 MiB huge page costs about the same
// once. Growing by copying, or even by mremap (whose TLB flushes cost as much), adds to that.
// So a column reserves address space for 8 GiB at once (MAP_NORESERVE: memory is used only
// as written, and the data never moves) and lays itself out so that its first 256 KiB end
// a 2 MiB block in small pages (a small table takes little memory), and everything after
// lies in 2 MiB blocks advised for transparent huge pages. Where the reservation is refused
// (strict overcommit) or outgrown, the mapping grows by mremap instead.
//
// Laid out alike, every column would start at the same offset into its 2 MiB block, and the
// columns a reader fills row by row at once (a dozen) would all map to the same sets of the
// CPU's caches (8 ways): each store evicted a line another column was still filling. So each
// column starts a few cache lines further into its block than the one made before it.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>
#include <utility>

#include "nanotrace/columns.hpp"

namespace nanotrace::detail {
namespace {

constexpr size_t kReserveBytes = size_t{8} << 30;  // address space, not memory
constexpr size_t kHugeBytes = size_t{2} << 20;
constexpr size_t kSmallBytes = size_t{256} << 10;  // in small pages, before the first huge one
constexpr size_t kFirstBytes = size_t{64} << 10;
// Columns start at one of kColours offsets kColourBytes apart, spread over a 4 KiB page (the
// span of a cache way: 64 sets of 64-byte lines).
constexpr size_t kColours = 16;
constexpr size_t kColourBytes = 256;

// The offset of the next column's data into its block, each column's other than the last.
size_t next_colour() {
  static std::atomic<size_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) % kColours * kColourBytes;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

ColumnStorage::~ColumnStorage() {
  if (base_ != nullptr) munmap(base_, mapped_);
}

ColumnStorage::ColumnStorage(ColumnStorage&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      base_(std::exchange(other.base_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)),
      ready_(std::exchange(other.ready_, 0)) {}

ColumnStorage& ColumnStorage::operator=(ColumnStorage&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    base_ = std::exchange(other.base_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    ready_ = std::exchange(other.ready_, 0);
  }
  return *this;
}

void ColumnStorage::reserve(size_t bytes, bool fill_ahead) {
  if (bytes <= ready_) return;
  if (base_ == nullptr) {
    // Room to align the data to a 2 MiB block minus kSmallBytes, wherever the kernel maps.
    size_t want = std::max(kReserveBytes, round_up(bytes, kHugeBytes) + 2 * kHugeBytes);
    void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      auto at = reinterpret_cast<uintptr_t>(p);
      uintptr_t huge = round_up(at + kSmallBytes, kHugeBytes);  // the first huge block
      base_ = p;
      mapped_ = want;
      data_ = reinterpret_cast<void*>(huge - kSmallBytes + next_colour());
      // A hint: without huge pages the column still works.
      madvise(reinterpret_cast<void*>(huge), at + want - huge, MADV_HUGEPAGE);
    } else {
      want = round_up(std::max(bytes, kFirstBytes), 4096);
      p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      base_ = data_ = p;
      mapped_ = want;
    }
  }
  const size_t usable = mapped_ - (static_cast<char*>(data_) - static_cast<char*>(base_));
  if (bytes > usable) {
    // mremap moves whole pages: the one data_ lies in, data_ its colour into it.
    char* page = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(data_) / 4096 * 4096);
    const size_t colour = static_cast<size_t>(static_cast<char*>(data_) - page);
    const size_t want = round_up(colour + std::max(bytes, 2 * usable), 4096);
    void* p = mremap(page, colour + usable, want, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (base_ != page) munmap(base_, static_cast<size_t>(page - static_cast<char*>(base_)));
    base_ = p;
    data_ = static_cast<char*>(p) + colour;
    mapped_ = want;
    ready_ = want - colour;
    return;
  }
  // The small pages before the first huge block (data_ starts a colour into them).
  const auto at = reinterpret_cast<uintptr_t>(data_);
  const size_t small = round_up(at, kHugeBytes) - at;
  if (fill_ahead && ready_ < small && base_ != data_) {
    // Small pages: fault the next part in with one call (a no-op before Linux 5.14).
    size_t upto = round_up(at + std::max({bytes, 2 * ready_, kFirstBytes}), 4096) - at;
    upto = std::min(upto, small);
    const uintptr_t from = (at + ready_) / 4096 * 4096;  // madvise takes whole pages
    madvise(reinterpret_cast<void*>(from), at + upto - from, MADV_POPULATE_WRITE);
    ready_ = upto;
  }
  if (bytes > ready_) ready_ = usable;  // huge pages fault in as they are written
}

}  // namespace nanotrace::detail
