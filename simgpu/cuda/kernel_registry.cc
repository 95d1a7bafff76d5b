#include "hangwatch/simgpu/cuda/kernel_registry.h"

namespace simgpu {

KernelRegistry& KernelRegistry::instance() {
  // Leaked: kernels may be launched from static destructors of user code.
  static KernelRegistry* registry = new KernelRegistry();
  return *registry;
}

void KernelRegistry::add(const void* entry, KernelInfo info) {
  std::lock_guard lock(mutex_);
  kernels_.insert_or_assign(entry, std::move(info));
}

std::optional<KernelInfo> KernelRegistry::find(const void* entry) {
  std::lock_guard lock(mutex_);
  auto it = kernels_.find(entry);
  if (it == kernels_.end() || it->second.unregistered) return std::nullopt;
  return it->second;
}

const char* KernelRegistry::name(const void* entry) {
  std::lock_guard lock(mutex_);
  auto it = kernels_.find(entry);
  return it == kernels_.end() ? nullptr : it->second.name.c_str();
}

bool KernelRegistry::setMaxDynamicShared(const void* entry, int bytes) {
  std::lock_guard lock(mutex_);
  auto it = kernels_.find(entry);
  if (it == kernels_.end() || it->second.unregistered) return false;
  it->second.max_dynamic_shared = bytes;
  return true;
}

void KernelRegistry::removeModule(const void* module) {
  std::lock_guard lock(mutex_);
  for (auto& [entry, info] : kernels_)
    if (info.module == module) info.unregistered = true;
}

}  // namespace simgpu
