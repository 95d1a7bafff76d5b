#pragma once
// Launchable functions, keyed by the address a program launches them by. Two kinds:
// sim kernels (simgpuRegisterKernel: a host body and the argument sizes to copy at
// launch) and nvcc's device functions (__cudaRegisterFunction: a host stub whose device
// code simgpu cannot run, so a launch is opaque device work of modeled duration).
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace simgpu {

enum class KernelBody { kHostFunction, kOpaqueDevice };

struct KernelInfo {
  std::string name;
  std::vector<size_t> arg_sizes;
  KernelBody body = KernelBody::kHostFunction;
  const void* module = nullptr;  // the fat binary handle of an nvcc function
  bool unregistered = false;           // its module was unregistered: no longer launchable
  int max_dynamic_shared = 48 * 1024;  // cudaFuncAttributeMaxDynamicSharedMemorySize
};

class KernelRegistry {
 public:
  static KernelRegistry& instance();

  void add(const void* entry, KernelInfo info);
  std::optional<KernelInfo> find(const void* entry);
  // Name storage stays valid for the life of the process, as cudaFuncGetName promises.
  const char* name(const void* entry);
  // __cudaUnregisterFatBinary: the module's functions can no longer be launched (their
  // names stay, as cudaFuncGetName's storage must).
  void removeModule(const void* module);
  // cudaFuncSetAttribute's limit for later launches; false for an unknown function.
  bool setMaxDynamicShared(const void* entry, int bytes);

  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
  std::map<const void*, KernelInfo> kernels_;
};

}  // namespace simgpu
