// A traced program that replaces the global operator new and delete with ones whose blocks
// malloc cannot free (a header before each block), as memory-tracking allocators do. It
// frees strings the runtime allocated (a segment path, error messages) and hands the runtime
// strings it allocated: with more than one allocator pair in the process, this crashes.
// Prints "ok N" (N: blocks its operator new handed out) and exits 0.
#include <cstdio>
#include <cstdlib>
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>
#include <new>
#include <string>

namespace {
constexpr size_t kHeader = 16;
constexpr uint64_t kMagic = 0x6e65772d686f7374ull;
size_t g_blocks = 0;

void* allocate(size_t n) {
  auto* p = static_cast<unsigned char*>(std::malloc(n + kHeader));
  if (p == nullptr) throw std::bad_alloc();
  *reinterpret_cast<uint64_t*>(p) = kMagic;
  ++g_blocks;
  return p + kHeader;
}

void release(void* q) {
  if (q == nullptr) return;
  auto* p = static_cast<unsigned char*>(q) - kHeader;
  if (*reinterpret_cast<uint64_t*>(p) != kMagic) {
    std::fprintf(stderr, "freed a block this operator new did not allocate\n");
    std::abort();
  }
  *reinterpret_cast<uint64_t*>(p) = 0;
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return allocate(n); }
void* operator new[](size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }

int main() {
  for (uint64_t i = 0; i < 100; ++i) NANOTRACE(host, tick, "i={}", i);
  // Strings the runtime allocates and this program frees.
  std::string path = nanotrace::segment_path();
  if (path.empty()) return 2;
  nanotrace::Status bad = nanotrace::arm_trigger("host:tick no_such_field_with_a_long_name>1");
  if (bad.ok() || bad.message().empty()) return 3;
  // A string this program allocates and the runtime copies and keeps.
  std::string expression = std::string("host:tick i>=") + std::to_string(1u << 30);
  if (!nanotrace::arm_trigger(expression).ok()) return 4;
  if (!nanotrace::disarm_trigger().ok()) return 5;
  std::printf("ok %zu\n", g_blocks);
  return 0;
}
