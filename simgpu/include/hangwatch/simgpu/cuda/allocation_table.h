#pragma once
// Live cudaMalloc/cudaMallocHost allocations (host memory on simgpu), so frees of
// unknown pointers fail like real CUDA and cudaMemGetInfo has something to report.
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>

namespace simgpu {

enum class MemoryKind { kDevice, kHostPinned, kManaged };

struct Allocation {
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kDevice;
  int device = 0;
};

class AllocationTable {
 public:
  static AllocationTable& instance();

  // Null when `bytes` would exceed the device's memory or the host is out of memory.
  void* allocate(size_t bytes, MemoryKind kind, int device);
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
