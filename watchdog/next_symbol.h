#pragma once
// The next definition of an interposed (or used) symbol after this library,
// resolved on first use with dlsym(RTLD_NEXT) and cached; resolving twice from
// racing threads yields the same pointer, so no lock is needed.
#include <dlfcn.h>

#include <atomic>

namespace hangwatch::watchdog {

template <typename Fn>
class NextSymbol {
 public:
  explicit constexpr NextSymbol(const char* name) : name_(name) {}

  // nullptr when no later object defines the symbol (e.g. no cublasLt on simgpu).
  Fn get() {
    void* p = ptr_.load(std::memory_order_acquire);
    if (__builtin_expect(p == nullptr, 0)) p = resolve();
    return p == missing() ? nullptr : reinterpret_cast<Fn>(p);
  }
  const char* name() const { return name_; }

 private:
  static void* missing() { return reinterpret_cast<void*>(1); }
  void* resolve() {
    void* p = dlsym(RTLD_NEXT, name_);
    if (p == nullptr) p = missing();
    ptr_.store(p, std::memory_order_release);
    return p;
  }

  const char* name_;
  std::atomic<void*> ptr_{nullptr};
};

}  // namespace hangwatch::watchdog
