#include "hangwatch/simgpu/cuda/device_symbols.h"

namespace simgpu {

DeviceSymbols& DeviceSymbols::instance() {
  // Leaked, as the kernel registry: modules unregister from atexit handlers.
  static DeviceSymbols* symbols = new DeviceSymbols();
  return *symbols;
}

void DeviceSymbols::add(const void* symbol, DeviceSymbol variable) {
  std::lock_guard lock(mutex_);
  symbols_.insert_or_assign(symbol, variable);
}

std::optional<DeviceSymbol> DeviceSymbols::find(const void* symbol) {
  std::lock_guard lock(mutex_);
  auto it = symbols_.find(symbol);
  if (it == symbols_.end()) return std::nullopt;
  return it->second;
}

void DeviceSymbols::removeModule(const void* module) {
  std::lock_guard lock(mutex_);
  std::erase_if(symbols_, [module](const auto& entry) { return entry.second.module == module; });
}

}  // namespace simgpu
