#pragma once
// Live cudaMalloc/cudaMallocHost allocations (host memory on simgpu), so frees of
// unknown pointers fail like real CUDA and cudaMemGetInfo has something to report.
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>

namespace simgpu {

// kHostRegistered: the program's own memory pinned by cudaHostRegister (not freed here).
enum class MemoryKind { kDevice, kHostPinned, kManaged, kHostRegistered };

inline bool isHostKind(MemoryKind kind) {
  return kind == MemoryKind::kHostPinned || kind == MemoryKind::kHostRegistered;
}

struct Allocation {
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kDevice;
  int device = 0;
  unsigned host_flags = 0;  // cudaHostAlloc / cudaHostRegister flags
};

class AllocationTable {
 public:
  static AllocationTable& instance();

  // Null when `bytes` would exceed the device's memory or the host is out of memory.
  void* allocate(size_t bytes, MemoryKind kind, int device, unsigned host_flags = 0);
  // cudaHostRegister: false when the range overlaps memory already pinned or registered.
  bool registerHost(void* ptr, size_t bytes, unsigned flags, int device);
  // cudaHostUnregister: false when `ptr` is not the start of a registered range.
  bool unregisterHost(void* ptr);
  // False when `ptr` is not the start of a live allocation: device/managed memory
  // when `device_kinds`, pinned host memory otherwise.
  bool release(void* ptr, bool device_kinds);
  // The allocation containing `ptr`, if any.
  std::optional<Allocation> find(const void* ptr);
  size_t deviceBytesInUse(int device);

  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
  std::map<const void*, Allocation> live_;
};

// What every emulated device claims to have.
constexpr size_t kDeviceMemoryBytes = size_t{80} << 30;

}  // namespace simgpu
