#pragma once
// Device variables nvcc registered (__cudaRegisterVar, __cudaRegisterManagedVar), keyed
// by the symbol the host passes to cudaMemcpyToSymbol / cudaGetSymbolAddress.
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>

namespace simgpu {

struct DeviceSymbol {
  void* storage;  // where the variable lives (device memory is host memory here)
  size_t size;
  const void* module;
};

class DeviceSymbols {
 public:
  static DeviceSymbols& instance();

  void add(const void* symbol, DeviceSymbol variable);
  std::optional<DeviceSymbol> find(const void* symbol);
  void removeModule(const void* module);

 private:
  std::mutex mutex_;
  std::map<const void*, DeviceSymbol> symbols_;
};

}  // namespace simgpu
