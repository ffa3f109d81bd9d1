// An io_uring program whose ring the interposer follows: it sets the ring up and enters it
// through the C library's syscall(), as a program built on liburing through glibc would, and
// maps it with mmap. Reads 4 KiB blocks of FILE one request at a time, checking each
// completion, and prints "ok N".
//
//   uring_program FILE N
#include <fcntl.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

uint32_t load_acquire(const void* base, uint32_t offset) {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(static_cast<const char*>(base) + offset),
                         __ATOMIC_ACQUIRE);
}

void store_release(void* base, uint32_t offset, uint32_t value) {
  __atomic_store_n(reinterpret_cast<uint32_t*>(static_cast<char*>(base) + offset), value,
                   __ATOMIC_RELEASE);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: uring_program FILE N\n");
    return 2;
  }
  const int n = std::atoi(argv[2]);
  const int fd = open(argv[1], O_RDONLY);
  if (fd < 0) return 3;
  io_uring_params p{};
  const int ring = static_cast<int>(syscall(__NR_io_uring_setup, 8, &p));
  if (ring < 0) return 4;
  const size_t sq_bytes = p.sq_off.array + p.sq_entries * sizeof(uint32_t);
  const size_t cq_bytes = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  void* sq = mmap(nullptr, sq_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                  IORING_OFF_SQ_RING);
  void* cq = mmap(nullptr, cq_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                  IORING_OFF_CQ_RING);
  auto* sqes = static_cast<io_uring_sqe*>(mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe),
                                               PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                                               ring, IORING_OFF_SQES));
  if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return 5;
  const uint32_t sq_mask = load_acquire(sq, p.sq_off.ring_mask);
  const uint32_t cq_mask = load_acquire(cq, p.cq_off.ring_mask);
  auto* array = reinterpret_cast<uint32_t*>(static_cast<char*>(sq) + p.sq_off.array);
  auto* cqes = reinterpret_cast<io_uring_cqe*>(static_cast<char*>(cq) + p.cq_off.cqes);
  static char buf[4096];
  for (int i = 0; i < n; ++i) {
    const uint32_t tail = load_acquire(sq, p.sq_off.tail);
    const uint32_t index = tail & sq_mask;
    io_uring_sqe& sqe = sqes[index];
    std::memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = IORING_OP_READ;
    sqe.fd = fd;
    sqe.addr = reinterpret_cast<uint64_t>(buf);
    sqe.len = sizeof(buf);
    sqe.off = static_cast<uint64_t>(i % 16) * sizeof(buf);
    sqe.user_data = static_cast<uint64_t>(i) + 1;
    array[index] = index;
    store_release(sq, p.sq_off.tail, tail + 1);
    if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, nullptr, 0) != 1) return 6;
    const uint32_t head = load_acquire(cq, p.cq_off.head);
    if (head == load_acquire(cq, p.cq_off.tail)) return 7;
    const io_uring_cqe& cqe = cqes[head & cq_mask];
    if (cqe.user_data != sqe.user_data || cqe.res != static_cast<int>(sizeof(buf))) return 8;
    store_release(cq, p.cq_off.head, head + 1);
  }
  munmap(sqes, p.sq_entries * sizeof(io_uring_sqe));
  munmap(cq, cq_bytes);
  munmap(sq, sq_bytes);
  close(ring);
  close(fd);
  std::printf("ok %d\n", n);
  return 0;
}
