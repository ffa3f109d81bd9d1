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
#include <sys/mman.h>

#include <algorithm>
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
      data_ = reinterpret_cast<void*>(huge - kSmallBytes);
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
    size_t want = round_up(std::max(bytes, 2 * usable), 4096);
    void* p = mremap(data_, usable, want, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (base_ != data_) munmap(base_, static_cast<char*>(data_) - static_cast<char*>(base_));
    base_ = data_ = p;
    mapped_ = want;
    ready_ = want;
    return;
  }
  if (fill_ahead && ready_ < kSmallBytes && base_ != data_) {
    // Small pages: fault the next part in with one call (a no-op before Linux 5.14).
    size_t upto = round_up(std::max({bytes, 2 * ready_, kFirstBytes}), 4096);
    upto = std::min(upto, kSmallBytes);
    madvise(static_cast<char*>(data_) + ready_, upto - ready_, MADV_POPULATE_WRITE);
    ready_ = upto;
  }
  if (bytes > ready_) ready_ = usable;  // huge pages fault in as they are written
}

}  // namespace nanotrace::detail
