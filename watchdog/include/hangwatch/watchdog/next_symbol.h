#pragma once
// The definition of an interposed (or used) symbol that the caller would have reached
// without this library. dlsym(RTLD_NEXT) sees only the global scope, so a CUDA or NCCL
// library that ctypes, a Python extension or a plugin loader opened RTLD_LOCAL is then
// looked up among all loaded objects (symbol_lookup.h). A hit is cached (racing threads
// store the same pointer); a miss is not: it is retried once more objects are loaded.
#include <atomic>
#include <cstdint>

#include "hangwatch/watchdog/symbol_lookup.h"

namespace hangwatch::watchdog {

template <typename Fn>
class NextSymbol {
 public:
  explicit constexpr NextSymbol(const char* name) : name_(name) {}

  // nullptr while no loaded object defines the symbol (e.g. no cublasLt on simgpu).
  Fn get() {
    void* p = ptr_.load(std::memory_order_acquire);
    if (__builtin_expect(p == nullptr, 0)) p = resolve();
    return reinterpret_cast<Fn>(p);
  }
  const char* name() const { return name_; }

 private:
  void* resolve() {
    const uint64_t loads = loadedObjectGeneration();
    if (missed_at_.load(std::memory_order_acquire) == loads) return nullptr;
    void* p = findNextDefinition(name_);
    if (p != nullptr)
      ptr_.store(p, std::memory_order_release);
    else
      missed_at_.store(loads, std::memory_order_release);
    return p;
  }

  const char* name_;
  std::atomic<void*> ptr_{nullptr};
  std::atomic<uint64_t> missed_at_{UINT64_MAX};  // load generation of the last miss
};

}  // namespace hangwatch::watchdog
