// One runtime per process image, however the library was linked. A host that links the
// static library and loads a plugin that links it too (a host built without -rdynamic
// cannot share its copy) has two copies of the runtime. The first to start owns the segment
// and publishes the address of its entry points in it (SegmentHeader::runtime_api); a copy
// that starts later finds that segment live and owned by its own image, and forwards every
// call to the owner instead of creating a second segment: one event table, one set of rings,
// one trigger. Each copy's tracepoints still run their own inline fast path, on the slot the
// owner gave the thread.
//
// Limitation: the owning copy must outlive the others (the usual case: the host, or the
// shared libnanotrace.so, which is never unloaded).
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "base/process.hpp"
#include "nanotrace/nanotrace.hpp"
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

constexpr uint64_t kApiMagic = 0x4e54'5254'4150'4931ull;  // "NTRTAPI1"

detail::Writer* this_writer() noexcept { return &detail::t_writer; }

}  // namespace

const RuntimeApi g_this_api = {
    kApiMagic,
    1,
    sizeof(RuntimeApi),
    &detail::reserve_slow,
    &detail::special_event,
    &detail::register_sites,
    &detail::unregister_sites,
    &this_writer,
    &detail::g_busy_slot,
    &detail::g_unclaimed_slot,
};

const RuntimeApi* g_forward = nullptr;

const RuntimeApi* find_runtime_of_this_image(pid_t pid) {
  std::string path = "/dev/shm/nanotrace-" + std::to_string(pid);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return nullptr;
  abi::SegmentHeader h{};
  bool ours = ::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
              std::memcmp(h.magic, abi::kSegmentMagic, sizeof(h.magic)) == 0 &&
              h.version == abi::kSegmentVersion && h.pid == static_cast<uint32_t>(pid) &&
              h.image_id == this_image_id() && h.runtime_api != 0 &&
              sys::segment_byte_locked(fd, sys::kWriterLockByte);
  ::close(fd);
  if (!ours) return nullptr;
  // The address is in this image (same AT_RANDOM bytes) and its owner holds the lock now.
  const auto* api = reinterpret_cast<const RuntimeApi*>(h.runtime_api);
  if (api == &g_this_api || api->magic != kApiMagic || api->version != 1 ||
      api->size != sizeof(RuntimeApi)) {
    return nullptr;
  }
  return api;
}

uint64_t forward_reserve(const RuntimeApi& to, uint32_t bytes, abi::ThreadSlot* slot) noexcept {
  detail::Writer& mine = detail::t_writer;
  detail::Writer* theirs = to.writer();
  // A tracepoint of either copy in a signal handler that interrupted another on this thread:
  // dropped and counted, as the owner does.
  if (slot == &detail::g_busy_slot || theirs->slot == to.busy_slot) {
    abi::ThreadSlot* own = theirs->owned;
    if (own != nullptr) asm volatile("addq $1, %0" : "+m"(own->dropped));
    return detail::kNoSpace;
  }
  uint64_t head = to.reserve_slow(bytes, theirs->owned ? theirs->owned : to.unclaimed_slot);
  if (head == detail::kNoSpace) return head;
  // Write where the owner placed this thread (its slot's check now bounds both copies).
  mine.data = theirs->data;
  mine.mask = theirs->mask;
  mine.owned = theirs->owned;
  return head;
}

}  // namespace nanotrace::runtime
