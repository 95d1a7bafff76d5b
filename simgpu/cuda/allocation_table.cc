#include "hangwatch/simgpu/cuda/allocation_table.h"

#include <algorithm>
#include <cstdlib>

namespace simgpu {

AllocationTable& AllocationTable::instance() {
  static AllocationTable* table = new AllocationTable();
  return *table;
}

void* AllocationTable::allocate(size_t bytes, MemoryKind kind, int device) {
  std::lock_guard lock(mutex_);
  if (kind != MemoryKind::kHostPinned) {
    size_t used = 0;
    for (auto& [p, a] : live_)
      if (a.kind != MemoryKind::kHostPinned && a.device == device) used += a.bytes;
    if (bytes > kDeviceMemoryBytes - used) return nullptr;
  }
  // 256-byte alignment, as cudaMalloc guarantees.
  size_t rounded = (bytes + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (p != nullptr) live_.emplace(p, Allocation{bytes, kind, device});
  return p;
}

bool AllocationTable::release(void* ptr, bool device_kinds) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end() || (it->second.kind != MemoryKind::kHostPinned) != device_kinds) return false;
  live_.erase(it);
  std::free(ptr);
  return true;
}

std::optional<Allocation> AllocationTable::find(const void* ptr) {
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(ptr);
  if (it == live_.begin()) return std::nullopt;
  --it;
  auto* base = static_cast<const char*>(it->first);
  if (static_cast<const char*>(ptr) >= base + std::max<size_t>(it->second.bytes, 1)) return std::nullopt;
  return it->second;
}

size_t AllocationTable::deviceBytesInUse(int device) {
  std::lock_guard lock(mutex_);
  size_t used = 0;
  for (auto& [p, a] : live_)
    if (a.kind != MemoryKind::kHostPinned && a.device == device) used += a.bytes;
  return used;
}

}  // namespace simgpu
