#include "hangwatch/simgpu/cuda/allocation_table.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>

namespace simgpu {

AllocationTable& AllocationTable::instance() {
  static AllocationTable* table = new AllocationTable();
  return *table;
}

void* AllocationTable::allocate(size_t bytes, MemoryKind kind, int device, unsigned host_flags) {
  std::lock_guard lock(mutex_);
  if (!isHostKind(kind)) {
    size_t used = 0;
    for (auto& [p, a] : live_)
      if (!isHostKind(a.kind) && a.device == device) used += a.bytes;
    if (bytes > kDeviceMemoryBytes - used) return nullptr;
  }
  // 256-byte alignment, as cudaMalloc guarantees.
  size_t rounded = (bytes + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (p != nullptr) live_.emplace(p, Allocation{bytes, kind, device, host_flags});
  return p;
}

bool AllocationTable::registerHost(void* ptr, size_t bytes, unsigned flags, int device) {
  std::lock_guard lock(mutex_);
  const char* begin = static_cast<const char*>(ptr);
  auto next = live_.lower_bound(ptr);
  if (next != live_.end() && static_cast<const char*>(next->first) < begin + bytes) return false;
  if (next != live_.begin()) {
    auto prev = std::prev(next);
    if (static_cast<const char*>(prev->first) + std::max<size_t>(prev->second.bytes, 1) > begin) return false;
  }
  live_.emplace(ptr, Allocation{bytes, MemoryKind::kHostRegistered, device, flags});
  return true;
}

bool AllocationTable::unregisterHost(void* ptr) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end() || it->second.kind != MemoryKind::kHostRegistered) return false;
  live_.erase(it);
  return true;
}

bool AllocationTable::release(void* ptr, bool device_kinds) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end() || it->second.kind == MemoryKind::kHostRegistered ||
      (it->second.kind != MemoryKind::kHostPinned) != device_kinds)
    return false;
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
    if (!isHostKind(a.kind) && a.device == device) used += a.bytes;
  return used;
}

}  // namespace simgpu
