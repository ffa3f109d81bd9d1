// The functions the interposer wraps, as the next object in the lookup order (the C library,
// libaio) defines them: resolved with dlsym(RTLD_NEXT) when the interposer is initialised,
// or on first use by a call that comes earlier (another library's constructor), so that a
// signal handler never has to resolve one. Internal header.
#pragma once

#include <dlfcn.h>

#include <atomic>

namespace nanotrace::interpose {

template <class F>
F real_function(std::atomic<void*>& slot, const char* name) noexcept {
  void* p = slot.load(std::memory_order_relaxed);
  if (__builtin_expect(p == nullptr, 0)) {
    p = dlsym(RTLD_NEXT, name);
    slot.store(p, std::memory_order_relaxed);
  }
  return reinterpret_cast<F>(p);
}

// The function a wrapper of `name` calls; Type is its pointer type.
#define NANOTRACE_REAL_SLOT(name) \
  std::atomic<void*> g_real_##name { nullptr }
#define NANOTRACE_REAL(Type, name) ::nanotrace::interpose::real_function<Type>(g_real_##name, #name)

}  // namespace nanotrace::interpose
